"""Helpers for the lifecycle tests: L1 rows written the way ingest writes them (message_keys + the partitioned
conversation_messages, tests-only SQL), weeks of their own far in the past (so a partition holds only one
test's rows), and counts of what the LLM ledger saw."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, text

from strataflow.config import Settings
from strataflow.textsearch import content_hash

INSERT_KEY = text(
    """
    insert into message_keys (namespace, source, source_message_id, subject_id, conversation_id, event_at,
                              content_hash)
    values (:namespace, :source, :source_message_id, :subject_id, :conversation_id, :event_at, :content_hash)
    returning message_id
    """
)
INSERT_MESSAGE = text(
    """
    insert into conversation_messages (message_id, namespace, subject_id, conversation_id, source,
                                       source_message_id, role, content, content_hash, lang, intent, event_at,
                                       expires_at)
    values (:message_id, :namespace, :subject_id, :conversation_id, :source, :source_message_id, :role,
            :content, :content_hash, 'en', :intent, :event_at, :expires_at)
    """
)

AddMessages = Callable[..., list[int]]


@pytest.fixture
def add_messages(engine: Engine) -> AddMessages:
    """add_messages(namespace, subject_id, [(event_at, role, content), ...], expires_at=None) -> message ids.

    expires_at defaults to event time + 30 days (a datetime overrides it for every row).
    """

    def add(
        namespace: str,
        subject_id: str,
        rows: list[tuple[datetime, str, str]],
        expires_at: datetime | None = None,
    ) -> list[int]:
        ids = []
        with engine.begin() as conn:
            conn.execute(
                text("select ensure_message_partitions(:lo, :hi)"),
                {"lo": min(r[0] for r in rows), "hi": max(r[0] for r in rows)},
            )
            for event_at, role, content in rows:
                row = {
                    "namespace": namespace,
                    "subject_id": subject_id,
                    "source": "test.jsonl",
                    "source_message_id": uuid.uuid4().hex,
                    "conversation_id": f"c-{subject_id}",
                    "event_at": event_at,
                    "content_hash": content_hash(content),
                    "role": role,
                    "content": content,
                    "intent": "question" if content.endswith("?") else "statement",
                    "expires_at": expires_at or event_at + timedelta(days=30),
                }
                row["message_id"] = conn.execute(INSERT_KEY, row).scalar_one()
                conn.execute(INSERT_MESSAGE, row)
                ids.append(row["message_id"])
        return ids

    return add


@pytest.fixture
def old_monday() -> datetime:
    """A Monday 00:00 UTC in 1980-1999 at random: a weekly partition (and ISO week) of the test's own."""
    return datetime(1980, 1, 7, tzinfo=UTC) + timedelta(weeks=random.randrange(0, 1000))


@pytest.fixture
def ledger_count(engine: Engine) -> Callable[[str], int]:
    """ledger_count(namespace) -> llm_calls rows of the namespace (one per request sent to a model)."""

    def count(namespace: str) -> int:
        with engine.connect() as conn:
            query = text("select count(*) from llm_calls where namespace = :ns")
            return conn.execute(query, {"ns": namespace}).scalar_one()

    return count


@pytest.fixture
def zoned(settings: Settings) -> Callable[[str], Settings]:
    """zoned(name) -> the session settings in another time zone (own engine, own session TimeZone)."""
    return lambda timezone_name: settings.model_copy(update={"timezone": timezone_name})
