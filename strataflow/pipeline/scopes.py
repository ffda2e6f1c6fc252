"""Scope discovery and per-scope progress for the LLM stages, in one place: which (namespace, subject) scopes
have new L1 rows (extract, hot memory) or unreflected L2 items (reflect), which scope-weeks need a report
(rollup, and the expiry guard's week hashes), their messages, an advisory lock so two processes never work on
one scope at once, and the watermark that records progress. Every list is cut to a shard (models/params.py
Shard) the same way.

Progress follows ingest order (conversation_messages.ingest_seq), never event time, so a late backfill of
old messages is still picked up, and a message whose content changed at re-ingest (new ingest_seq) comes back.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import Connection, text

from models.params import Recompute, Shard
from strataflow.config import Settings
from strataflow.memory.api import NAMESPACE_VISIBLE
from strataflow.timeutil import week_bounds, week_start_sql
from strataflow.timeutil import week_start as week_start_of

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
SELECT_UNREFLECTED_SCOPES = text(
    f"""
    select namespace, subject_id, count(*) as pending
    from memory_items
    where reflected_version is distinct from version and {NAMESPACE_VISIBLE}
      and (cast(:namespace as text) is null or namespace = cast(:namespace as text))
    group by namespace, subject_id
    order by namespace, subject_id
    """
)
# The one write of a watermark (advance_watermark): position never moves back; checksum and value, the
# state of the last completed ingest of a file or SQL source, replace the stored ones when given.
UPSERT_WATERMARK = text(
    """
    insert into watermarks (stage, namespace, scope, position, checksum, value, run_id, updated_at)
    values (:stage, :namespace, :scope, :position, :checksum, coalesce(cast(:value as jsonb), '{}'), :run_id,
            now())
    on conflict (stage, namespace, scope) do update
    set position = greatest(watermarks.position, excluded.position),
        checksum = coalesce(excluded.checksum, watermarks.checksum),
        value = case when cast(:value as jsonb) is null then watermarks.value else excluded.value end,
        run_id = excluded.run_id, updated_at = now()
    """
)
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)  # a recompute window with no start
# The input hash of a scope-week, over message_keys rows `k` (they outlive L1): ids and content hashes.
WEEK_HASH_SQL = "md5(string_agg(k.message_id::text || ':' || k.content_hash, ',' order by k.message_id))"
# Per (namespace, subject, week in :tz): how many messages (all, still live) and the hash of their identities.
SELECT_WEEK_INPUTS = text(
    f"""
    with week_inputs as (
        select k.namespace, k.subject_id,
               {week_start_sql("k.event_at")} as week_start,
               count(*) as message_count,
               count(*) filter (where k.expired_at is null) as live_count,
               {WEEK_HASH_SQL} as input_hash
        from message_keys as k
        where (cast(:namespace as text) is null or k.namespace = cast(:namespace as text))
          and k.event_at >= :since and k.event_at < :until
        group by 1, 2, 3
    )
    select w.namespace, w.subject_id, w.week_start, w.message_count, w.live_count, w.input_hash,
           r.input_hash as stored_hash
    from week_inputs as w
    left join weekly_reports as r
      on r.namespace = w.namespace and r.subject_id = w.subject_id and r.week_start = w.week_start
    where cast(:all_scopes as boolean) or r.input_hash is distinct from w.input_hash
    order by w.week_start, w.namespace, w.subject_id
    """
)
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
    conn: Connection,
    stage: str,
    namespace: str,
    scope: str,
    run_id: uuid.UUID | None,
    *,
    position: int | None = None,
    checksum: str | None = None,
    value: dict[str, Any] | None = None,
) -> None:
    """The one writer of watermarks; call it in the transaction that wrote what the watermark records.

    An LLM stage's scope is a subject and its position the ingest_seq reached: the stored position never
    moves back (the larger one wins), so a run that started earlier and commits later, or a replay, cannot
    undo progress and make a stage pay for the same messages twice. An ingest's scope is a file path or a
    SQL source, its checksum the file's and its value what it needs to resume (a SQL source's last
    updated_at): these describe the last completed ingest and replace the stored ones when given.
    """
    state = {"checksum": checksum, "value": None if value is None else json.dumps(value)}
    key = {"stage": stage, "namespace": namespace, "scope": scope}
    conn.execute(UPSERT_WATERMARK, {**key, **state, "position": position, "run_id": run_id})


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


def week_inputs(
    conn: Connection,
    tz_name: str,
    namespace: str | None,
    since: datetime,
    until: datetime,
    all_scopes: bool = False,
) -> list[Any]:
    """Scope-weeks with messages in [since, until): their input hash and the stored report's hash.

    Only weeks whose report is missing or stale, unless all_scopes. Shared with the expiry guard.
    """
    params = {"tz": tz_name, "namespace": namespace, "since": since, "until": until, "all_scopes": all_scopes}
    return list(conn.execute(SELECT_WEEK_INPUTS, params))


def scope_weeks(
    conn: Connection,
    settings: Settings,
    week_start: date | None,
    namespace: str | None,
    shard: Shard,
    now: datetime | None = None,
) -> list[Any]:
    """The scope-weeks of this shard to look at: every scope of one week (week_start: any day of it), or
    every complete week with no current report (catch-up)."""
    tz = settings.tz
    if week_start is not None:
        since, until = week_bounds(week_start_of(week_start, tz), tz)
    else:
        since = EARLIEST
        until = week_bounds(week_start_of(now or datetime.now(UTC), tz), tz)[0]
    rows = week_inputs(conn, settings.timezone, namespace, since, until, all_scopes=week_start is not None)
    return [row for row in rows if shard.owns(row.namespace, row.subject_id)]


def unreflected_scopes(conn: Connection, namespace: str | None, shard: Shard) -> list[Scope]:
    """This shard's scopes with L2 items whose current version is not reflected yet (reflect's units)."""
    rows = conn.execute(SELECT_UNREFLECTED_SCOPES, {"namespace": namespace})
    return [
        Scope(row.namespace, row.subject_id, 0, 0)
        for row in rows
        if shard.owns(row.namespace, row.subject_id)
    ]
