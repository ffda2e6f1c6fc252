"""Helpers for retrieval tests: messages written through the real ingest write path, inside the test's
transaction (the `conn` fixture rolls everything back)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import Connection, text

from strataflow.config import Settings
from strataflow.ingest.enrich import ChunkOptions, prepare_chunk
from strataflow.ingest.staging import write_chunk

BASE_TIME = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

SET_EMBEDDING = text(
    """
    update conversation_messages set embedding = :embedding, embedding_model = 'test'
    where namespace = :namespace and source = 'test' and source_message_id = :source_message_id
    """
)


def add_messages(
    conn: Connection,
    settings: Settings,
    namespace: str,
    messages: Sequence[dict[str, Any]],
    embeddings: np.ndarray | None = None,
) -> None:
    """Write messages (dicts with at least content; defaults for the rest, namespace included) and, when
    given, their vectors. One chunk per call: the ingest's staging table lives until the transaction ends."""
    records = []
    for n, message in enumerate(messages):
        records.append(
            {
                "conversation_id": message.get("conversation_id", "c1"),
                "subject_id": message.get("subject_id", "u1"),
                "source_message_id": message.get("source_message_id", f"m{n}"),
                "role": message.get("role", "user"),
                "content": message["content"],
                "created_at": message.get("created_at", BASE_TIME + timedelta(minutes=n)).isoformat(),
                "metadata": message.get("metadata", {}),
                "namespace": message.get("namespace", namespace),
            }
        )
    options = ChunkOptions(
        default_source="test",
        tz=settings.tz,
        max_content_chars=settings.max_content_chars,
        retention_days=settings.retention_days,
    )
    chunk = prepare_chunk([(n, None, r) for n, r in enumerate(records)], options)
    assert not chunk.quarantined, chunk.quarantined
    write_chunk(conn, chunk, len(records), None, settings.retention_days)
    if embeddings is not None:
        conn.execute(
            SET_EMBEDDING,
            [
                {
                    "embedding": np.asarray(v, dtype=np.float32),
                    "namespace": r["namespace"],
                    "source_message_id": r["source_message_id"],
                }
                for r, v in zip(records, embeddings, strict=True)
            ],
        )


@pytest.fixture(name="add_messages")
def add_messages_fixture() -> Any:
    """add_messages(conn, settings, namespace, messages, embeddings=None); times default from BASE_TIME."""
    return add_messages


@pytest.fixture(scope="session")
def embedder(settings: Settings) -> Any:
    from strataflow.llm.embeddings import get_embedder

    return get_embedder(settings)
