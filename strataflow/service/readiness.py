"""Readiness of a server process: the database answers and sql/ (migrations and view files) is applied."""

from __future__ import annotations

import re

from pydantic import BaseModel, Field
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from strataflow.db import migrations

QUOTED = re.compile(r'"[^"]*"')


class Readiness(BaseModel):
    ready: bool
    database: str = Field(description="ok, or why the database cannot be used")
    pending_migrations: list[str] = Field(
        description="numbered migrations and view files (views/NAME.sql) not applied (strataflow db upgrade)"
    )


def readiness(engine: Engine) -> Readiness:
    try:
        states = migrations.status(engine)
    except SQLAlchemyError as exc:
        reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        reason = QUOTED.sub('"…"', reason)  # no socket path, host or file name of this machine
        return Readiness(ready=False, database=f"unreachable: {reason}", pending_migrations=[])
    pending = [state.name for state in states if state.state != "applied"]
    return Readiness(ready=not pending, database="ok", pending_migrations=pending)
