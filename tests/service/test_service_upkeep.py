"""The service's upkeep (issue 36 item 6): the API starts again the embedded database it uses when it stops;
/readyz names no socket path when the database is down; `list-keys` marks the keys of a dropped role."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import anyio
import pytest
from sqlalchemy import Engine, create_engine, text

from strataflow.config import Settings
from strataflow.db import embedded, roles
from strataflow.service import app as service_app
from strataflow.service import keys
from strataflow.service.readiness import readiness


def test_the_api_starts_its_stopped_embedded_database_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    embedded.ensure_running(home)
    embedded.stop(home)
    assert not embedded.is_running(home)
    monkeypatch.setattr(service_app, "DB_WATCH_EVERY_S", 0.2)

    async def watch() -> float:
        started = time.monotonic()
        with anyio.move_on_after(120):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(service_app.keep_embedded_database, Settings(home=home))
                while not embedded.is_running(home):
                    await anyio.sleep(0.2)
                tasks.cancel_scope.cancel()
        return time.monotonic() - started

    try:
        took = anyio.run(watch)
        assert embedded.is_running(home), f"not started again after {took:.0f} s"
    finally:
        embedded.stop(home)


def test_readyz_names_no_socket_path_when_the_database_is_down(tmp_path: Path) -> None:
    gone = tmp_path / "no-server-here"
    state = readiness(create_engine(f"postgresql+psycopg://nobody@/none?host={gone}"))
    assert not state.ready and state.database.startswith("unreachable")
    assert str(tmp_path) not in state.database and ".s.PGSQL" not in state.database, state.database


def test_list_keys_marks_the_keys_of_a_dropped_role(engine: Engine) -> None:
    role = f"t_dropped_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        roles.create_role(conn, role, "agent", with_password=False)
        keys.create_key(conn, f"{role}-k", role)
    with engine.begin() as conn:
        assert {k.name: k.status for k in keys.list_keys(conn)}[f"{role}-k"] == "active"
        conn.execute(text(f'drop role "{role}"'))
        assert {k.name: k.status for k in keys.list_keys(conn)}[f"{role}-k"] == "role-dropped"
