"""Per-scope progress for the LLM stages: which (namespace, subject) scopes have new L1 rows, their messages,
an advisory lock so two processes never work on one scope at once, and the watermark that records progress.

Progress follows ingest order (conversation_messages.ingest_seq), never event time, so a late backfill of
old messages is still picked up, and a message whose content changed at re-ingest (new ingest_seq) comes back.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, text

from models.params import Recompute, Shard

SELECT_PENDING_SCOPES = text(
    """
    select m.namespace, m.subject_id, coalesce(max(w.position), 0) as after_seq, max(m.ingest_seq) as upto_seq
    from conversation_messages m
    left join watermarks w on w.stage = :stage and w.namespace = m.namespace and w.scope = m.subject_id
    where (cast(:namespace as text) is null or m.namespace = cast(:namespace as text))
    group by m.namespace, m.subject_id
    having max(m.ingest_seq) > coalesce(max(w.position), 0)
    order by m.namespace, m.subject_id
    """
)
SELECT_SCOPES_SINCE = text(
    """
    select namespace, subject_id, 0 as after_seq, max(ingest_seq) as upto_seq
    from conversation_messages
    where event_at >= :since
      and (cast(:until as timestamptz) is null or event_at < cast(:until as timestamptz))
      and (cast(:namespace as text) is null or namespace = cast(:namespace as text))
    group by namespace, subject_id
    order by namespace, subject_id
    """
)
SELECT_SCOPE_MESSAGES = text(
    """
    select message_id, role, content, content_hash, event_at, ingest_seq
    from conversation_messages
    where namespace = :namespace and subject_id = :subject_id
      and ingest_seq > :after_seq and ingest_seq <= :upto_seq
      and (cast(:since as timestamptz) is null or event_at >= cast(:since as timestamptz))
    order by ingest_seq
    """
)
UPSERT_WATERMARK = text(
    """
    insert into watermarks (stage, namespace, scope, position, run_id, updated_at)
    values (:stage, :namespace, :scope, :position, :run_id, now())
    on conflict (stage, namespace, scope) do update
    set position = greatest(watermarks.position, excluded.position), run_id = excluded.run_id,
        updated_at = now()
    """
)
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)  # a recompute window with no start
TRY_LOCK = text("select pg_try_advisory_lock(hashtextextended(:lock_key, 0))")
UNLOCK = text("select pg_advisory_unlock(hashtextextended(:lock_key, 0))")


@dataclass(frozen=True)
class Scope:
    namespace: str
    subject_id: str
    after_seq: int
    upto_seq: int


@dataclass(frozen=True)
class ScopeMessage:
    message_id: int
    role: str
    content: str
    content_hash: str
    event_at: datetime
    ingest_seq: int


def pending_scopes(
    conn: Connection,
    stage: str,
    namespace: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[Scope]:
    """Scopes with L1 rows past the stage's watermark, or (since given) rows with event time >= since (and
    < until, when given)."""
    if since is not None:
        rows = conn.execute(SELECT_SCOPES_SINCE, {"namespace": namespace, "since": since, "until": until})
    else:
        rows = conn.execute(SELECT_PENDING_SCOPES, {"stage": stage, "namespace": namespace})
    return [Scope(*row) for row in rows]


def stage_scopes(
    conn: Connection, stage: str, namespace: str | None, shard: Shard, recompute: Recompute | None = None
) -> list[Scope]:
    """One shard's scopes with messages past the stage's watermark, or (recompute) in its window."""
    if recompute is None:
        scopes = pending_scopes(conn, stage, namespace)
    else:
        scopes = pending_scopes(conn, stage, namespace, recompute.since or EARLIEST, recompute.until)
    return [scope for scope in scopes if shard.owns(scope.namespace, scope.subject_id)]


def scope_messages(conn: Connection, scope: Scope, since: datetime | None = None) -> list[ScopeMessage]:
    """The scope's messages in (after_seq, upto_seq], in ingest order."""
    params = {
        "namespace": scope.namespace,
        "subject_id": scope.subject_id,
        "after_seq": scope.after_seq,
        "upto_seq": scope.upto_seq,
        "since": since,
    }
    return [ScopeMessage(*row) for row in conn.execute(SELECT_SCOPE_MESSAGES, params)]


def advance_watermark(
    conn: Connection, stage: str, scope: Scope, position: int, run_id: uuid.UUID | None
) -> None:
    """Record progress (never moves back); call it in the transaction that wrote the scope's results."""
    conn.execute(
        UPSERT_WATERMARK,
        {
            "stage": stage,
            "namespace": scope.namespace,
            "scope": scope.subject_id,
            "position": position,
            "run_id": run_id,
        },
    )


@contextmanager
def scope_lock(conn: Connection, stage: str, scope: Scope) -> Iterator[bool]:
    """A session advisory lock on (stage, scope): yields False when another process holds it."""
    lock_key = f"{stage}:{scope.namespace}:{scope.subject_id}"
    acquired = bool(conn.execute(TRY_LOCK, {"lock_key": lock_key}).scalar())
    conn.commit()
    try:
        yield acquired
    finally:
        if acquired:
            conn.execute(UNLOCK, {"lock_key": lock_key})
            conn.commit()
