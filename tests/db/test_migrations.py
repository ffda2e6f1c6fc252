"""Migrations: apply to an empty database, idempotent, refuse edited files, clear errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, text

from strataflow.config import Settings
from strataflow.db import migrations
from strataflow.db.engine import DatabaseError, check_connection, libpq_url, sqlalchemy_url

CONTRACT_TABLES = [
    "conversation_messages",
    "memory_items",
    "memory_item_versions",
    "weekly_reports",
    "insights",
    "asset_documents",
    "asset_chunks",
    "profile_documents",
    "pipeline_runs",
    "watermarks",
    "quarantine",
    "llm_calls",
    "deletion_reports",
]


@pytest.fixture
def scratch_db(engine: Engine, settings: Settings):
    """An empty database on the embedded server, dropped afterwards."""
    name = "scratch_migrations"
    admin = create_engine(sqlalchemy_url(libpq_url(settings)), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"drop database if exists {name}"))
        conn.execute(text(f"create database {name}"))
    url = sqlalchemy_url(libpq_url(settings)).replace("/postgres?", f"/{name}?")
    scratch = create_engine(url)
    yield scratch
    scratch.dispose()
    with admin.connect() as conn:
        conn.execute(text(f"drop database if exists {name} with (force)"))
    admin.dispose()


def test_upgrade_applies_every_file_then_does_nothing(scratch_db: Engine) -> None:
    first = migrations.upgrade(scratch_db)
    second = migrations.upgrade(scratch_db)
    assert first == [m.name for m in migrations.discover()]
    assert second == []
    assert {s.state for s in migrations.status(scratch_db)} == {"applied"}


def test_contract_tables_extension_and_indexes_exist(engine: Engine) -> None:
    with engine.connect() as conn:
        present = {
            t: conn.execute(text("select to_regclass(:t) is not null"), {"t": t}).scalar()
            for t in CONTRACT_TABLES
        }
        assert present == {t: True for t in CONTRACT_TABLES}
        assert conn.execute(text("select extversion from pg_extension where extname = 'vector'")).scalar()
        indexes = set(
            conn.execute(text("select indexname from pg_indexes where schemaname = 'public'")).scalars()
        )
    for index in (
        "conversation_messages_embedding_idx",
        "conversation_messages_fts_idx",
        "memory_items_embedding_idx",
        "asset_chunks_fts_idx",
        "weekly_reports_embedding_idx",
    ):
        assert index in indexes


def test_edited_migration_is_refused(scratch_db: Engine, tmp_path: Path) -> None:
    for path in migrations.SQL_DIR.glob("*.sql"):
        shutil.copy(path, tmp_path / path.name)
    migrations.upgrade(scratch_db, tmp_path)
    first = sorted(tmp_path.glob("*.sql"))[1]
    first.write_text(first.read_text() + "\n-- an edit\n")
    with pytest.raises(migrations.MigrationError, match=f"{first.name} was edited after it was applied"):
        migrations.upgrade(scratch_db, tmp_path)
    assert [s.state for s in migrations.status(scratch_db, tmp_path)][1] == "edited"


def test_missing_vector_extension_says_how_to_install(scratch_db: Engine, tmp_path: Path) -> None:
    # A server without pgvector answers CREATE EXTENSION with "could not open extension control file";
    # an extension name the server lacks produces exactly that error on the real server.
    (tmp_path / "001_create_extensions.sql").write_text("create extension if not exists vector_missing_here;")
    with pytest.raises(migrations.MigrationError) as info:
        migrations.upgrade(scratch_db, tmp_path)
    assert "needs the PostgreSQL extension 'vector_missing_here'" in str(info.value)
    assert "rerun `strataflow db upgrade`" in str(info.value)


def test_missing_pgvector_message_says_how_to_install() -> None:
    message = migrations._missing_extension_help("001_create_extensions.sql", "vector")
    assert "apt install postgresql-16-pgvector" in message and "unset DATABASE_URL" in message


def test_bad_database_url_names_the_problem(strataflow_home: Path) -> None:
    bad = Settings(home=strataflow_home, database_url="postgresql://nobody@127.0.0.1:1/none")
    with pytest.raises(DatabaseError, match="cannot connect to PostgreSQL at .*127.0.0.1:1"):
        check_connection(bad)
    with pytest.raises(DatabaseError, match="must point at PostgreSQL"):
        check_connection(Settings(home=strataflow_home, database_url="mysql://x@localhost/db"))
