"""Settings validation and the shared embedded server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from strataflow.config import SettingsError, load_settings
from strataflow.db.engine import libpq_url


@pytest.mark.parametrize(
    ("env_name", "value", "message"),
    [
        (
            "STRATAFLOW_TIMEZONE",
            "Mars/Olympus",
            "STRATAFLOW_TIMEZONE: .*unknown time zone",
        ),  # not an IANA zone
        ("STRATAFLOW_RETENTION_DAYS", "0", "STRATAFLOW_RETENTION_DAYS: .*greater than or equal to 1"),
        ("STRATAFLOW_EMBEDDING_DIM", "768", "STRATAFLOW_EMBEDDING_DIM: .*vector\\(384\\)"),  # schema is 384-d
        ("STRATAFLOW_TASK_RUNNER", "celery", "STRATAFLOW_TASK_RUNNER: .*'thread' or 'dask'"),
    ],
)
def test_bad_setting_fails_naming_the_setting(
    monkeypatch: pytest.MonkeyPatch, env_name: str, value: str, message: str
) -> None:
    monkeypatch.setenv(env_name, value)
    with pytest.raises(SettingsError, match=message):
        load_settings()


def test_database_url_is_read_unprefixed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgres://u:secret@db.example/mem")
    settings = load_settings()
    assert libpq_url(settings) == "postgresql://u:secret@db.example/mem"
    assert "secret" not in repr(settings)


def test_second_process_reuses_the_running_embedded_server(engine, settings, strataflow_home: Path) -> None:
    from pgserver.utils import PostmasterInfo

    pid_before = PostmasterInfo.read_from_pgdata(strataflow_home / "pg").pid
    env = {**os.environ, "STRATAFLOW_HOME": str(strataflow_home)}
    out = subprocess.run(
        [sys.executable, "-m", "strataflow.cli", "db", "url"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == libpq_url(settings)
    assert PostmasterInfo.read_from_pgdata(strataflow_home / "pg").pid == pid_before


def test_embedded_server_runs_with_bulk_write_buffers(engine) -> None:
    """A new home's server is restarted once with SERVER_SETTINGS_MB, so a bulk ingest's writers do not write
    WAL 8 kB at a time whenever PostgreSQL's default 4 MB of WAL buffers fill (strataflow/db/embedded.py)."""
    from sqlalchemy import text

    from strataflow.db import embedded

    query = "select setting::bigint from pg_settings where name = 'wal_buffers'"
    with engine.connect() as conn:
        pages = conn.execute(text(query)).scalar_one()
    assert embedded.SERVER_SETTINGS_MB == {"wal_buffers": 64}
    assert pages == 64 * 1024 // embedded.PAGE_KB
