"""Analyst views (sql/06x): each runs on the loaded sample and returns rows of its namespace, is documented
column by column, respects the caller's row-level security, and lineage reaches expired messages."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any as AccessData

import pytest
from sqlalchemy import Connection, Engine, text

from strataflow.memory import store

VIEWS = (
    "memories",
    "weekly_report_summaries",
    "current_insights",
    "llm_cost_daily",
    "pipeline_health",
    "retention_schedule",
    "deletions",
    "lineage",
)


@pytest.mark.parametrize("view", VIEWS)
def test_view_returns_rows_of_the_loaded_namespace(
    engine: Engine, access_data: AccessData, view: str
) -> None:
    with engine.connect() as conn:
        count = conn.execute(
            text(f"select count(*) from {view} where namespace = :ns"), {"ns": access_data.namespace}
        ).scalar()
    assert count and count > 0, f"{view} has no rows for the loaded sample ({access_data.counts})"


@pytest.mark.parametrize("view", VIEWS)
def test_view_is_security_invoker_and_every_column_is_documented(conn: Connection, view: str) -> None:
    options = conn.execute(
        text("select reloptions from pg_class where relname = :v and relkind = 'v'"), {"v": view}
    ).scalar()
    assert options and "security_invoker=true" in options
    assert conn.execute(text("select obj_description(to_regclass(:v), 'pg_class')"), {"v": view}).scalar()
    undocumented = (
        conn.execute(
            text(
                """
            select a.attname from pg_attribute as a
            where a.attrelid = to_regclass(:v) and a.attnum > 0 and not a.attisdropped
              and col_description(a.attrelid, a.attnum) is null
            """
            ),
            {"v": view},
        )
        .scalars()
        .all()
    )
    columns = conn.execute(text(f"select * from {view} limit 0")).keys()
    assert "namespace" in columns
    assert undocumented == []


def test_memory_as_of_reads_history_bi_temporally(conn: Connection, namespace: str) -> None:
    from strataflow.memory.api import create_memory, update_memory

    saved = create_memory(conn, namespace, "u1", "fact", "city", "Hangzhou", statement="I live in Hangzhou")
    before_update = conn.execute(text("select clock_timestamp()")).scalar()
    update_memory(conn, namespace, saved.item.id, value="Shanghai")

    def as_of(moment: datetime, known_at: datetime | None = None) -> list[tuple[str, object]]:
        rows = conn.execute(
            text("select key, value from memory_as_of(:ts, :known) where namespace = :ns"),
            {"ts": moment, "known": known_at, "ns": namespace},
        )
        return [tuple(row) for row in rows]

    now = conn.execute(text("select clock_timestamp()")).scalar()
    assert as_of(saved.item.recorded_at - timedelta(seconds=1)) == []
    assert as_of(before_update) == [("city", "Hangzhou")]
    assert as_of(now + timedelta(seconds=1)) == [("city", "Shanghai")]
    # an extracted value kept out of the manual item never holds
    protected = store.upsert_item(
        conn, namespace=namespace, subject_id="u1", kind="fact", key="city", value="Beijing",
        statement="I live in Beijing", event_at=datetime.now(UTC) + timedelta(seconds=2),
    )  # fmt: skip
    assert protected == "manual_protected"
    assert as_of(now + timedelta(seconds=5), now + timedelta(seconds=5)) == [("city", "Shanghai")]
    # a backfill of an older event, recorded now: known today, not known at the time
    moved = before_update - timedelta(days=30)
    store.upsert_item(
        conn, namespace=namespace, subject_id="u1", kind="fact", key="employer", value="Northwind",
        statement="I work at Northwind", event_at=moved,
    )  # fmt: skip
    assert ("employer", "Northwind") not in as_of(moved + timedelta(days=1))
    assert ("employer", "Northwind") in as_of(moved + timedelta(days=1), known_at=now + timedelta(seconds=5))


def test_lineage_reaches_messages_and_shows_expired_ones(engine: Engine, access_data: AccessData) -> None:
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                """
                select artifact_type, is_expired, expired_at, content, source_message_id
                from lineage where namespace = :ns
                """
            ),
            {"ns": access_data.namespace},
        ).all()
    assert {row.artifact_type for row in rows} >= {"memory_item", "weekly_report"}
    expired = [row for row in rows if row.is_expired]
    assert expired, "the 40-day-old messages were expired by the fixture; lineage must still list them"
    assert all(row.expired_at is not None and row.content is None for row in expired)
    assert any(row.content for row in rows if not row.is_expired)


def test_views_respect_row_level_security_of_the_caller(engine: Engine, access_data: AccessData) -> None:
    role = "t_access_reader"
    with engine.begin() as conn:
        if (
            conn.execute(text("select to_regprocedure('strataflow_apply_namespace_security()')")).scalar()
            is None
        ):
            pytest.fail("row-level security (sql/090) is not installed")
        conn.execute(text(f"drop role if exists {role}"))
        conn.execute(text(f"create role {role} nologin in role strataflow_analyst"))
        try:
            conn.execute(text(f"set local role {role}"))
            for view in VIEWS:
                visible = conn.execute(text(f"select count(*) from {view}")).scalar()
                assert visible == 0, f"{view} shows rows of namespaces the role was not granted"
        finally:
            conn.execute(text("reset role"))
            conn.execute(text(f"drop role {role}"))
