"""Attacks on the embedded server's logins: a role URL rewritten to the superuser, a URL without its
password, a password read from the statement log; and a home made before passwords existed, secured on its
next start."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from sqlalchemy import Engine, text

from strataflow.config import Settings
from strataflow.db import embedded, passwords, roles
from strataflow.db.engine import libpq_url


def _cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STRATAFLOW_HOME": str(home)}
    return subprocess.run(
        [sys.executable, "-m", "strataflow.cli", *args], env=env, capture_output=True, text=True, check=False
    )


def _login_error(url: str, **changes: str | None) -> str | None:
    """Connect with url changed (None drops a part); the refusal, or None when the login worked."""
    info = conninfo_to_dict(url)
    for key, value in changes.items():
        if value is None:
            info.pop(key, None)
        else:
            info[key] = value
    try:
        with psycopg.connect(make_conninfo(**info), connect_timeout=5) as conn:
            conn.execute("select 1")
    except psycopg.OperationalError as exc:
        return str(exc)
    return None


@pytest.fixture(scope="module")
def agent_url(settings: Settings, engine: Engine, strataflow_home: Path) -> str:
    name = f"agent_{uuid.uuid4().hex[:8]}"
    created = _cli(strataflow_home, "access", "create-role", name, "--kind", "agent")
    assert created.returncode == 0, created.stderr
    url = _cli(strataflow_home, "db", "url", "--role", name)
    assert url.returncode == 0, url.stderr
    return url.stdout.strip()


def test_a_role_url_logs_in_as_that_role_with_its_stored_password(agent_url: str) -> None:
    user = conninfo_to_dict(agent_url)["user"]
    with psycopg.connect(agent_url) as conn:
        assert conn.execute("select current_user").fetchone() == (user,)


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ({"user": "postgres", "password": None}, "the superuser without a password"),
        ({"user": "postgres"}, "the superuser with the role's password"),
        ({"password": None}, "the role without its password"),
        ({"password": "guessed"}, "the role with a wrong password"),
        ({"user": "strataflow_pipeline", "password": None}, "a group role"),
    ],
)
def test_a_rewritten_role_url_is_refused(agent_url: str, changes: dict[str, str | None], why: str) -> None:
    refusal = _login_error(agent_url, **changes)
    assert refusal is not None, f"logged in as {why}"
    assert "password" in refusal or "not permitted to log in" in refusal


def test_the_owner_needs_its_password_too(settings: Settings) -> None:
    owner_url = libpq_url(settings)
    assert _login_error(owner_url) is None
    assert _login_error(owner_url, password=None) is not None


def test_a_backup_still_logs_in_and_is_private(engine: Engine, strataflow_home: Path, tmp_path: Path) -> None:
    dump = tmp_path / "strataflow.dump"
    result = _cli(strataflow_home, "db", "backup", str(dump))
    assert result.returncode == 0, result.stderr
    assert dump.stat().st_size > 0 and stat.S_IMODE(dump.stat().st_mode) == 0o600


def test_passwords_are_kept_private_and_stored_as_scram_verifiers(
    engine: Engine, strataflow_home: Path, agent_url: str
) -> None:
    owner_file = passwords.owner_password_path(strataflow_home)
    role_file = passwords.role_password_path(strataflow_home, conninfo_to_dict(agent_url)["user"])
    modes = {path.name: stat.S_IMODE(path.stat().st_mode) for path in (owner_file, role_file)}
    assert modes == {owner_file.name: 0o600, role_file.name: 0o600}
    assert stat.S_IMODE(passwords.secrets_dir(strataflow_home).stat().st_mode) == 0o700
    hba = (strataflow_home / "pg" / "pg_hba.conf").read_text()
    methods = {line.split()[-1] for line in hba.splitlines() if line.strip() and not line.startswith("#")}
    assert methods == {"scram-sha-256"}
    with engine.connect() as conn:
        stored = conn.execute(
            text("select rolname, rolpassword from pg_authid where rolcanlogin and rolpassword is not null")
        ).all()
    assert stored and all(row.rolpassword.startswith("SCRAM-SHA-256$4096:") for row in stored)


def test_a_new_password_never_reaches_the_statement_log_in_clear_text(
    engine: Engine, strataflow_home: Path
) -> None:
    name = f"agent_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        conn.execute(text("set local log_statement = 'all'"))
        password = roles.create_role(conn, name, "agent")
    assert password is not None
    log = (strataflow_home / "pg" / "log").read_text(errors="replace")
    assert f'statement: alter role "{name}" password \'SCRAM-SHA-256$4096:' in log  # it was logged
    assert password not in log


def test_a_home_made_before_passwords_is_secured_on_its_next_start(tmp_path: Path) -> None:
    import pgserver

    home = tmp_path / "old-home"
    home.mkdir()
    # What older strataflow did: pgserver's trusting initdb, and a login role without a password.
    trusting = pgserver.get_server(home / "pg", cleanup_mode=None).get_uri()
    try:
        with psycopg.connect(trusting, autocommit=True) as conn:
            conn.execute("create role strataflow_agent nologin")
            conn.execute("create role old_agent login in role strataflow_agent")
        assert _login_error(trusting) is None  # no password needed yet

        owner_url = embedded.ensure_running(home)

        assert _login_error(trusting) is not None and _login_error(owner_url) is None
        role_password = passwords.role_password(home, "old_agent")
        assert role_password is not None
        assert _login_error(owner_url, user="old_agent", password=role_password) is None
        assert _login_error(owner_url, user="old_agent", password=None) is not None
        assert embedded.ensure_running(home) == owner_url  # secured once; later starts reuse it
    finally:
        embedded.stop(home)
