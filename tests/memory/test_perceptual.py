"""Perceptual memory (seed 004): today's messages and items per scope, today in the configured zone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import text

from strataflow.db.engine import engine_for
from strataflow.memory.store import upsert_item

SELECT_TODAY = text(
    "select memory_type, memory_id, text from perceptual_memory where namespace = :ns "
    "order by memory_type, memory_id"
)


def test_perceptual_memory_holds_only_todays_messages_and_items(zoned, engine, add_messages, namespace):
    settings = zoned("Asia/Shanghai")
    now = datetime.now(UTC)
    (today,) = add_messages(namespace, "u1", [(now, "user", "Today I booked the flight.")])
    add_messages(namespace, "u1", [(now - timedelta(days=2), "user", "Two days ago I packed.")])
    with engine.begin() as conn:
        upsert_item(
            conn,
            namespace=namespace,
            subject_id="u1",
            kind="intent",
            key="travel",
            value="flight booked",
            statement="Today I booked the flight.",
            event_at=now,
            source_message_ids=[today],
        )

    with engine_for(settings).connect() as conn:
        assert conn.execute(text("show timezone")).scalar_one() == "Asia/Shanghai"
        rows = list(conn.execute(SELECT_TODAY, {"ns": namespace}))

    assert [(r.memory_type, r.text) for r in rows] == [
        ("item", "Today I booked the flight."),
        ("message", "Today I booked the flight."),
    ]
    assert rows[1].memory_id == today
