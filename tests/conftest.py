"""Session fixtures: one embedded PostgreSQL (migrated once), settings pointing at it, and a Prefect harness.

Tests that call code which commits use a namespace of their own (the `namespace` fixture) so they never
see each other's rows; tests of plain functions use `conn`, rolled back at the end.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, Engine

# Before anything imports litellm, prefect or the model: offline, quiet, no telemetry.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("MEM0_TELEMETRY", "false")  # read when mem0 is imported, not when a client is made
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
for _var in ("DATABASE_URL", "STRATAFLOW_DATABASE_URL", "PREFECT_API_URL"):
    os.environ.pop(_var, None)

from strataflow.config import Settings, load_settings  # noqa: E402
from strataflow.db.engine import dispose_engines, engine_for  # noqa: E402
from tests.fixtures.http_replies import QuietHandler, chat_completion, on_loopback, send_json  # noqa: E402

# The tests are laid out like the code (tests/db, tests/ingest, tests/llm, tests/memory, tests/retrieval,
# tests/ops, tests/service, tests/tasks, tests/flows, ...); the fixtures several of them share live in
# tests/fixtures, one module per kind of test data, loaded for every test.
pytest_plugins = [
    "tests.fixtures.access_data",
    "tests.fixtures.batch_server",
    "tests.fixtures.daily_logs",
    "tests.fixtures.echo_llm",
    "tests.fixtures.extracted",
    "tests.fixtures.ingested_rows",
    "tests.fixtures.l1_rows",
    "tests.fixtures.locomo_format",
    "tests.fixtures.records",
    "tests.fixtures.scripted_model",
    "tests.fixtures.service",
]


@pytest.fixture(scope="session")
def strataflow_home() -> Iterator[Path]:
    # Not under pytest's basetemp: as root the server runs as the 'pgserver' user, who must traverse every
    # parent of its data directory, and any other pytest session started meanwhile makes /tmp/pytest-of-root
    # 0700 again (the shared server then crashed at its next checkpoint: pg_control, permission denied).
    home = Path(tempfile.mkdtemp(prefix="strataflow-home-"))
    os.environ["STRATAFLOW_HOME"] = str(home)
    os.environ["PREFECT_HOME"] = str(home / "prefect")
    yield home
    from strataflow.db import embedded

    dispose_engines()
    embedded.stop(home)
    shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def settings(strataflow_home: Path) -> Settings:
    return load_settings(home=strataflow_home)


@pytest.fixture(scope="session")
def engine(settings: Settings) -> Engine:
    from strataflow.db import migrations

    engine = engine_for(settings)
    migrations.upgrade(engine)  # the same code path as `strataflow db upgrade`
    return engine


@pytest.fixture
def conn(engine: Engine) -> Iterator[Connection]:
    with engine.connect() as conn:
        tx = conn.begin()
        yield conn
        tx.rollback()


@pytest.fixture
def namespace() -> str:
    """A namespace no other test uses, for code that commits."""
    return f"t_{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def prefect_harness(strataflow_home: Path) -> Iterator[None]:
    """One Prefect test server for the whole session (request it in flow tests)."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=None):
        yield


class ScriptedLLMServer:
    """An OpenAI-compatible /v1/chat/completions server on 127.0.0.1 (litellm's real HTTP path in tests).

    Replies first from `script` [(status, content)] in order, then 200 with `fallback(body)`. Records each
    request body and its Authorization header.
    """

    def __init__(self) -> None:
        self.script: list[tuple[int, str]] = []
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str] = []
        self.fallback: Callable[[dict[str, Any]], str] = lambda body: '{"items": []}'
        server = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                server.authorizations.append(self.headers.get("Authorization", ""))
                status, content = server.script.pop(0) if server.script else (200, server.fallback(body))
                if status == 200:
                    payload = chat_completion(len(server.requests), body["model"], content, 100, 20)
                else:
                    kind = "rate_limit" if status == 429 else "server_error"
                    payload = {"error": {"message": content, "type": kind}}
                send_json(self, payload, status)

        self.httpd, self.url, self.thread = on_loopback(Handler)

    def prompt_of(self, index: int) -> str:
        return "\n".join(m["content"] for m in self.requests[index]["messages"])

    def prompts(self) -> list[str]:
        return [self.prompt_of(index) for index in range(len(self.requests))]


@pytest.fixture
def scripted_llm_server() -> Iterator[ScriptedLLMServer]:
    server = ScriptedLLMServer()
    server.thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()
