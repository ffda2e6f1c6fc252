"""Schema migrations: the numbered .sql files in sql/, applied in order, each in its own transaction, then the
view files of sql/views/ (strataflow.db.views), checked on every upgrade and applied where a view differs.

Each applied numbered file is recorded in schema_migrations with its checksum; an applied file that was edited
is refused (add a new numbered file instead). A view's definition lives in its one file and is edited there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import psycopg
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError

from strataflow.db import views
from strataflow.hashes import content_hash

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
    name: str  # NNN_verb_object.sql, or views/NAME.sql for a view file
    state: str  # applied, pending, edited (numbered files only: view files are meant to be edited)
    applied_at: str | None


@dataclass(frozen=True)
class UpgradeResult:
    migrations: list[str]  # numbered files applied now
    views: list[str]  # views whose definition, options, privileges or comments changed (or were created)


def discover(sql_dir: Path = SQL_DIR) -> list[Migration]:
    """Every numbered migration file, in order."""
    migrations = []
    for path in sorted(sql_dir.glob("*.sql")):
        if not MIGRATION_NAME.match(path.name):
            continue
        body = path.read_text(encoding="utf-8")
        migrations.append(Migration(path.name, content_hash(body), body))
    return migrations


def status(engine: Engine, sql_dir: Path = SQL_DIR) -> list[MigrationStatus]:
    """Every numbered file, then every view file (pending: new or changed since the last upgrade)."""
    view_files = _discover_views(sql_dir)
    with engine.begin() as conn:
        conn.execute(CREATE_MIGRATIONS_TABLE)
        applied = {row.name: row for row in conn.execute(SELECT_APPLIED)}
        view_states = views.status(conn, view_files)
    result = []
    for migration in discover(sql_dir):
        row = applied.get(migration.name)
        if row is None:
            result.append(MigrationStatus(migration.name, "pending", None))
        else:
            state = "applied" if row.checksum == migration.checksum else "edited"
            result.append(MigrationStatus(migration.name, state, row.applied_at.isoformat()))
    result += [MigrationStatus(f"views/{v.name}.sql", v.state, v.applied_at) for v in view_states]
    return result


def upgrade(engine: Engine, sql_dir: Path = SQL_DIR) -> list[str]:
    """Apply pending migrations, then every view file; return the names of the migrations applied (empty when
    up to date)."""
    return upgrade_all(engine, sql_dir).migrations


def upgrade_all(engine: Engine, sql_dir: Path = SQL_DIR) -> UpgradeResult:
    """Apply pending numbered migrations in order and re-apply grants and row-level security after them, then
    the views of sql/views/ (one transaction, dependency order; strataflow.db.views says which it applies),
    with grants for any view that is new."""
    view_files = _discover_views(sql_dir)  # a bad view file stops the upgrade before anything changes
    view_names = [view.name for view in view_files]
    restore: dict[str, list[str]] = {}  # owner and grants of views dropped for a migration, until re-created
    applied_now: list[str] = []
    with engine.begin() as conn:
        conn.execute(CREATE_MIGRATIONS_TABLE)
        conn.execute(views.CREATE_VIEWS_TABLE)  # before the migrations: sql/230 comments both tables
    for migration in discover(sql_dir):
        with engine.begin() as conn:
            conn.execute(text("select pg_advisory_xact_lock(:id)"), {"id": MIGRATIONS_LOCK_ID})
            if _already_applied(conn, migration):
                continue
            _apply(conn, migration, view_names, restore)
            applied_now.append(migration.name)
    if applied_now:
        with engine.begin() as conn:
            _secure_new_relations(conn)
    with engine.begin() as conn:
        conn.execute(text("select pg_advisory_xact_lock(:id)"), {"id": MIGRATIONS_LOCK_ID})
        try:
            changed, created = views.apply(conn, view_files, restore, everything=bool(applied_now))
        except views.ViewError as exc:
            raise MigrationError(str(exc)) from None
        if created:
            _secure_new_relations(conn)  # same transaction: a new view never exists without its grants
    if applied_now:
        # Pooled connections opened before the vector type existed have no pgvector adapter (database.py
        # registers it on connect): drop them so every later connection gets it.
        engine.dispose()
    return UpgradeResult(applied_now, changed)


def _discover_views(sql_dir: Path) -> list[views.View]:
    try:
        return views.discover(sql_dir)
    except views.ViewError as exc:
        raise MigrationError(str(exc)) from None


def _secure_new_relations(conn: Connection) -> None:
    """Re-apply namespace row-level security and grants, covering tables and views added by later files or
    created by the view stage, then take back what agents must not have (sql/101: history writes, identity
    columns), in that order; the dbt role's read policy (sql/240) covers new tables too."""
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


def _apply(
    conn: Connection, migration: Migration, view_names: list[str], restore: dict[str, list[str]]
) -> None:
    """Run one numbered file. When it fails because a view of sql/views/ reads what it changes (a column's
    type, a dropped column), drop those views (their owner and grants kept in `restore`) and run it again:
    the view stage creates them from their files after the last migration."""
    try:
        with conn.begin_nested():
            views.run_script(conn, migration.sql)
    except (DBAPIError, psycopg.Error) as exc:
        if views.sqlstate(exc) not in views.BLOCKED_BY_VIEW or not views.states(conn, view_names):
            raise _failed(migration, exc) from None
        try:
            for name, statements in views.drop(conn, view_names, view_names).items():
                restore.setdefault(name, statements)  # the first capture is the one before any drop
        except views.ViewError as drop_error:
            message = f"sql/{migration.name} failed: {views.error_text(exc)}; {drop_error}"
            raise MigrationError(message) from None
        try:
            views.run_script(conn, migration.sql)
        except (DBAPIError, psycopg.Error) as retry_exc:
            raise _failed(migration, retry_exc) from None
    conn.execute(INSERT_APPLIED, {"name": migration.name, "checksum": migration.checksum})


def _failed(migration: Migration, exc: BaseException) -> MigrationError:
    message = views.error_text(exc)
    missing = MISSING_EXTENSION.search(message)
    if missing:
        return MigrationError(_missing_extension_help(migration.name, missing.group(1) or missing.group(2)))
    return MigrationError(f"sql/{migration.name} failed: {message}")


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
