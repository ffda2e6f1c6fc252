"""Schema migrations: the numbered .sql files in sql/, applied in order, each in its own transaction.

Each applied file is recorded in schema_migrations with its checksum; an applied file that was edited
is refused (add a new numbered file instead).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import psycopg
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"
MIGRATION_NAME = re.compile(r"^\d{3}_[a-z0-9_]+\.sql$")
MIGRATIONS_LOCK_ID = 73_910_001  # pg_advisory_xact_lock key: one migrator at a time

CREATE_MIGRATIONS_TABLE = text(
    """
    create table if not exists schema_migrations (
        name text primary key,
        checksum text not null,
        applied_at timestamptz not null default now()
    )
    """
)
SELECT_APPLIED = text("select name, checksum, applied_at from schema_migrations order by name")
INSERT_APPLIED = text("insert into schema_migrations (name, checksum) values (:name, :checksum)")


MISSING_EXTENSION = re.compile(
    r'extension "([a-z0-9_]+)" is not available'
    r'|could not open extension control file ".*/([a-z0-9_]+)\.control"',
    re.IGNORECASE,
)


class MigrationError(RuntimeError):
    """A migration cannot be applied; the message says which file and why."""


@dataclass(frozen=True)
class Migration:
    name: str
    checksum: str
    sql: str


@dataclass(frozen=True)
class MigrationStatus:
    name: str
    state: str  # applied, pending, edited
    applied_at: str | None


def discover(sql_dir: Path = SQL_DIR) -> list[Migration]:
    """Every numbered migration file, in order."""
    migrations = []
    for path in sorted(sql_dir.glob("*.sql")):
        if not MIGRATION_NAME.match(path.name):
            continue
        body = path.read_text(encoding="utf-8")
        migrations.append(Migration(path.name, hashlib.sha256(body.encode()).hexdigest(), body))
    return migrations


def status(engine: Engine, sql_dir: Path = SQL_DIR) -> list[MigrationStatus]:
    with engine.begin() as conn:
        conn.execute(CREATE_MIGRATIONS_TABLE)
        applied = {row.name: row for row in conn.execute(SELECT_APPLIED)}
    result = []
    for migration in discover(sql_dir):
        row = applied.get(migration.name)
        if row is None:
            result.append(MigrationStatus(migration.name, "pending", None))
        else:
            state = "applied" if row.checksum == migration.checksum else "edited"
            result.append(MigrationStatus(migration.name, state, row.applied_at.isoformat()))
    return result


def upgrade(engine: Engine, sql_dir: Path = SQL_DIR) -> list[str]:
    """Apply pending migrations; return the names applied (empty when up to date)."""
    applied_now: list[str] = []
    with engine.begin() as conn:
        conn.execute(CREATE_MIGRATIONS_TABLE)
    for migration in discover(sql_dir):
        with engine.begin() as conn:
            conn.execute(text("select pg_advisory_xact_lock(:id)"), {"id": MIGRATIONS_LOCK_ID})
            if _already_applied(conn, migration):
                continue
            _apply(conn, migration)
            applied_now.append(migration.name)
    if applied_now:
        _secure_new_relations(engine)
        # Pooled connections opened before the vector type existed have no pgvector adapter (database.py
        # registers it on connect): drop them so every later connection gets it.
        engine.dispose()
    return applied_now


def _secure_new_relations(engine: Engine) -> None:
    """Re-apply namespace row-level security and grants, covering tables and views added by later files, then
    take back what agents must not have (sql/101: history writes, identity columns), in that order; the dbt
    role's read policy (sql/240) covers new tables too."""
    with engine.begin() as conn:
        for function in (
            "strataflow_apply_namespace_security()",
            "strataflow_restrict_agent_writes()",
            "strataflow_apply_transform_security()",
        ):
            if conn.execute(text("select to_regprocedure(:f)"), {"f": function}).scalar():
                conn.execute(text(f"select {function}"))


def _already_applied(conn: Connection, migration: Migration) -> bool:
    row = conn.execute(
        text("select checksum from schema_migrations where name = :name"), {"name": migration.name}
    ).one_or_none()
    if row is None:
        return False
    if row.checksum != migration.checksum:
        raise MigrationError(
            f"sql/{migration.name} was edited after it was applied (checksum {row.checksum[:12]} in the "
            f"database, {migration.checksum[:12]} on disk). Applied migrations are immutable: revert the "
            "edit and put the change in a new numbered file."
        )
    return True


def _apply(conn: Connection, migration: Migration) -> None:
    try:
        # The raw psycopg cursor with no parameters: the file runs as written (no %-placeholder parsing).
        with conn.connection.dbapi_connection.cursor() as cursor:  # type: ignore[union-attr]
            cursor.execute(migration.sql)
    except (DBAPIError, psycopg.Error) as exc:
        message = str(getattr(exc, "orig", None) or exc).strip()
        missing = MISSING_EXTENSION.search(message)
        if missing:
            raise MigrationError(
                _missing_extension_help(migration.name, missing.group(1) or missing.group(2))
            ) from None
        raise MigrationError(f"sql/{migration.name} failed: {message}") from None
    conn.execute(INSERT_APPLIED, {"name": migration.name, "checksum": migration.checksum})


def _missing_extension_help(migration_name: str, extension: str) -> str:
    hint = ""
    if extension == "vector":
        hint = (
            " Install pgvector on the server (Debian/Ubuntu: apt install postgresql-16-pgvector; elsewhere "
            "see pgvector's install guide), or unset DATABASE_URL to use the embedded server, which ships it."
        )
    return (
        f"sql/{migration_name} needs the PostgreSQL extension {extension!r}, which this server does not have "
        f"installed.{hint} Then rerun `strataflow db upgrade`."
    )
