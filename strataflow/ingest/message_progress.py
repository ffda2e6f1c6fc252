"""Where written L1 messages stand: found by their keys (namespace, source, source_message_id), with whether
the extract stage has read them yet.

A message counts as extracted once the extract stage's watermark of its subject (sql/290,
strataflow_extraction_position: readable by agent and analyst roles, which may not read watermarks) has
passed its ingest_seq, or once its L1 row has expired (expiry waits for the stages that read it). Extraction
follows ingest order, so this is exactly "the nightly, backfill or `strataflow extract` run has processed it".
message_keys keeps a message's key after its L1 row expires, so the answer stays available.

Used by the mem0-compatible API: `add(..., infer=True)` writes messages through strataflow.ingest.online and
answers an event that is PENDING until they are extracted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

SELECT_BY_KEYS = text(
    """
    select k.message_id, k.source_message_id, k.subject_id, k.conversation_id, k.first_ingested_at,
        k.expired_at, m.ingest_seq, m.agent_id, m.role, m.content, m.metadata,
        strataflow_extraction_position(k.namespace, k.subject_id) as extracted_upto
    from message_keys as k
    left join conversation_messages as m on m.message_id = k.message_id and m.event_at = k.event_at
    where k.source_message_id = any(cast(:keys as text[])) and k.namespace = :namespace and k.source = :source
    order by k.message_id
    """
)


@dataclass(frozen=True)
class MessageProgress:
    """One written message: its ids, scope, when it was written and whether extraction has read it."""

    message_id: int
    source_message_id: str
    subject_id: str
    conversation_id: str
    agent_id: str | None
    role: str | None
    content: str | None  # None once its L1 row has expired
    metadata: dict[str, Any]
    ingested_at: datetime
    extracted: bool


def message_progress(
    conn: Connection, namespace: str, source: str, source_message_ids: Sequence[str]
) -> list[MessageProgress]:
    """The messages of these keys in the namespace (the caller's role sees only its own), in id order."""
    params = {"keys": list(source_message_ids), "namespace": namespace, "source": source}
    return [
        MessageProgress(
            message_id=int(row.message_id),
            source_message_id=row.source_message_id,
            subject_id=row.subject_id,
            conversation_id=row.conversation_id,
            agent_id=row.agent_id,
            role=row.role,
            content=row.content,
            metadata=dict(row.metadata or {}),
            ingested_at=row.first_ingested_at,
            extracted=row.expired_at is not None
            or (
                row.ingest_seq is not None
                and row.extracted_upto is not None
                and row.ingest_seq <= row.extracted_upto
            ),
        )  # fmt: skip
        for row in conn.execute(SELECT_BY_KEYS, params)
    ]
