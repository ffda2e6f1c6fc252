"""The MCP server reads only its own settings (issue 28 item 6), through the official SDK's stdio client: no
settings from the environment of the process that started it, no .env from its working directory (a
tripwire listener records any connection to the DATABASE_URL and model endpoint such a file names), and a
key checked at start with a message that says what is wrong. The settings file comes from STRATAFLOW_HOME
or STRATAFLOW_ENV_FILE only."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from sqlalchemy import Engine

from strataflow.config import SettingsError, load_settings, settings_file
from tests.fixtures.service import Tenant, make_tenant

ROOT = Path(__file__).resolve().parents[2]


class Tripwire:
    """A listener that records every connection (a client that should never come)."""

    def __init__(self) -> None:
        self.hits = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = int(self.sock.getsockname()[1])
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.hits += 1
            conn.close()


def _session(env: dict[str, str], cwd: Path, calls: list[tuple[str, dict[str, Any]]], errlog: Path) -> Any:
    """(initialize error or None, [(is_error, text)]) of `python -m strataflow.cli mcp` over stdio."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "strataflow.cli", "mcp"], env={"PYTHONPATH": str(ROOT), **env},
        cwd=cwd,
    )  # fmt: skip

    async def run() -> Any:
        with errlog.open("w") as err:
            try:
                async with (
                    stdio_client(params, errlog=err) as (read, write),
                    ClientSession(read, write) as session,
                ):
                    await asyncio.wait_for(session.initialize(), 120)
                    answers = []
                    for tool, arguments in calls:
                        result = await session.call_tool(tool, arguments)
                        answers.append((bool(result.is_error), " ".join(c.text for c in result.content)))
                    return None, answers
            except Exception as exc:  # noqa: BLE001 - a server that exits at start ends the session
                return f"{type(exc).__name__}", []

    return asyncio.run(run())


def test_no_settings_from_the_parent_environment_and_a_clear_exit_without_a_key(
    tenants: dict[str, Tenant], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tripwire = Tripwire()
    # This process (the client) has a key, a home and an unrelated DATABASE_URL; the server gets none.
    monkeypatch.setenv("STRATAFLOW_API_KEY", tenants["alpha"].key)
    monkeypatch.setenv("DATABASE_URL", f"postgresql://evil:pw@127.0.0.1:{tripwire.port}/evil")
    errlog = tmp_path / "mcp.err"
    failed, answers = _session({"HOME": str(tmp_path)}, tmp_path, [("memory_recall", {"query": "x"})], errlog)
    assert failed is not None and answers == []
    assert "needs an API key" in errlog.read_text() and tripwire.hits == 0


@pytest.mark.parametrize("which", ["invalid", "revoked"])
def test_the_key_is_checked_at_start(engine: Engine, tmp_path: Path, which: str) -> None:
    from strataflow.service import keys

    tenant = make_tenant(engine, "agent", (f"mcp_{uuid.uuid4().hex[:6]}",))
    key = "sf_0badc0de_" + "x" * 43
    if which == "revoked":
        with engine.begin() as conn:
            keys.revoke_key(conn, tenant.role)
        key = tenant.key
    errlog = tmp_path / "mcp.err"
    env = {"STRATAFLOW_API_KEY": key, "STRATAFLOW_HOME": os.environ["STRATAFLOW_HOME"]}
    failed, _ = _session(env, tmp_path, [], errlog)
    assert failed is not None
    assert ("not valid" if which == "invalid" else "revoked") in errlog.read_text()


def test_a_dotenv_in_the_working_directory_is_ignored(
    api_url: str, tenants: dict[str, Tenant], tmp_path: Path, subject: str
) -> None:
    database, model = Tripwire(), Tripwire()
    repo = tmp_path / "cloned-repo"
    repo.mkdir()
    (repo / ".env").write_text(
        f"DATABASE_URL=postgresql://evil:pw@127.0.0.1:{database.port}/evil\n"
        "STRATAFLOW_EXTRACT_MODEL=ollama/evil-model\n"
        f"STRATAFLOW_LLM_API_BASE=http://127.0.0.1:{model.port}\n"
    )
    word = f"zebrafjord{uuid.uuid4().hex[:6]}"
    tenants["alpha"].client(api_url).post(
        "/v1/memories", json={"subject": subject, "type": "user", "name": "canary", "content": f"{word} here"}
    )
    env = {"STRATAFLOW_API_KEY": tenants["alpha"].key, "STRATAFLOW_HOME": os.environ["STRATAFLOW_HOME"]}
    said = "I am 33 and I live in Braga."
    calls = [("memory_recall", {"query": word, "subject": subject}),
             ("save_user_memory", {"subject": subject, "user_message": said})]  # fmt: skip
    failed, answers = _session(env, repo, calls, tmp_path / "mcp.err")
    assert failed is None and not answers[0][0] and word in answers[0][1] and not answers[1][0], answers
    assert (database.hits, model.hits) == (0, 0)


def test_the_settings_file_comes_from_the_home_or_an_explicit_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    (cwd / ".env").write_text("STRATAFLOW_RETENTION_DAYS=11\n")
    monkeypatch.chdir(cwd)
    monkeypatch.setenv("STRATAFLOW_HOME", str(home))
    monkeypatch.delenv("STRATAFLOW_ENV_FILE", raising=False)
    monkeypatch.delenv("STRATAFLOW_RETENTION_DAYS", raising=False)
    assert settings_file() is None and load_settings().retention_days == 30  # the working directory: never
    (home / ".env").write_text("STRATAFLOW_RETENTION_DAYS=12\n")
    assert settings_file() == home / ".env" and load_settings().retention_days == 12
    explicit = tmp_path / "prod.env"
    explicit.write_text("STRATAFLOW_RETENTION_DAYS=13\n")
    monkeypatch.setenv("STRATAFLOW_ENV_FILE", str(explicit))
    assert load_settings().retention_days == 13
    monkeypatch.setenv("STRATAFLOW_ENV_FILE", str(tmp_path / "missing.env"))
    with pytest.raises(SettingsError, match="STRATAFLOW_ENV_FILE"):
        load_settings()
