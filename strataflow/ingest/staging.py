"""Staging writer: prepared chunks into L1 with COPY and set-based SQL (strataflow/ingest/pipeline.py streams
the chunks of a bulk ingest; the service writes one small chunk at a time).

Per chunk, in one transaction: COPY into a temp staging table (each staged row draws a fresh message_id from
message_keys' own sequence), create missing weekly partitions, insert new keys into message_keys, insert
their rows into conversation_messages (with the full-text vector); when some keys already existed, rewrite
those whose content_hash changed (same message_id; new content, fts and ingest_seq; embedding cleared;
possibly another partition) and skip the rest. A key whose L1 row expired (message_keys.expired_at) is never
brought back. Bad records of the chunk go to quarantine in the same transaction. A chunk of a run over every
namespace that wrote rows records the run in their namespaces in the same transaction (sql/480), so a run
that dies after its ingest is still seen by each namespace's analysts once it is marked crashed.

A restore (`strataflow import`) also writes the keys of messages whose L1 row had expired in the exported
namespace (restore_expired_keys): the lineage anchors of L2/L3 rows, which outlive L1.
"""

from __future__ import annotations

import uuid
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from typing import Any

import psycopg
from pydantic import BaseModel
from sqlalchemy import Connection, text
from sqlalchemy.exc import IntegrityError

from strataflow.ingest.enrich import STAGE_COLUMNS, PreparedChunk
from strataflow.ingest.quarantine import write_quarantine
from strataflow.timeutil import utc_week_starts

EVENT_AT = STAGE_COLUMNS.index("event_at")

# The staging tables (created once per connection) empty at commit; a caller writing two chunks in one
# transaction needs the deletes too (cheaper than truncate when the tables are already empty).
PREPARE_STAGE = text(
    """
    create temp table if not exists ingest_stage (
        message_id bigint default nextval('message_keys_message_id_seq'),
        namespace text, source text, source_message_id text, subject_id text, agent_id text,
        conversation_id text, role text, content text, content_hash text, lang text, intent text,
        event_at timestamptz, metadata jsonb, fts_en text, fts_zh text, fts text
    ) on commit delete rows;
    create temp table if not exists ingest_changed (
        message_id bigint, old_event_at timestamptz, ingested_at timestamptz,
        namespace text, source text, source_message_id text
    ) on commit delete rows;
    delete from ingest_stage;
    delete from ingest_changed
    """
)
# The run's trace in the namespaces of the chunk's rows (a run of one namespace has its row already).
NOTE_RUN_NAMESPACES = text(
    "select strataflow_note_run_namespaces(:run_id, array(select distinct namespace from ingest_stage))"
)
COPY_STAGE = f"copy ingest_stage ({', '.join(STAGE_COLUMNS)}) from stdin"
COPY_STAGE_WITH_VECTORS = f"copy ingest_stage ({', '.join(STAGE_COLUMNS)}, fts) from stdin"
MESSAGE_COLUMNS = (
    "namespace, subject_id, agent_id, conversation_id, source, source_message_id, role, content, "
    "content_hash, lang, intent, event_at, expires_at, metadata"
)
SELECT_MESSAGE_COLUMNS = ", ".join(
    "s.event_at + make_interval(days => :retention_days)"
    if name.strip() == "expires_at"
    else f"s.{name.strip()}"
    for name in MESSAGE_COLUMNS.split(",")
)
# textsearch.TSVECTOR_SQL, unless the row's vector came built (fulltext.py); the 'simple' half is skipped
# when there is no Chinese (it would be empty).
FTS = (
    "case when s.fts is not null then cast(s.fts as tsvector) "
    "when s.fts_zh = '' then to_tsvector('english', s.fts_en) "
    "else to_tsvector('english', s.fts_en) || to_tsvector('simple', s.fts_zh) end"
)
# Staged rows carry a fresh message_id from message_keys' own sequence, so new keys need no text-key join.
INSERT_KEYS = text(
    """
    insert into message_keys (message_id, namespace, source, source_message_id, subject_id, conversation_id,
                              event_at, content_hash, agent_id)
    overriding system value
    select message_id, namespace, source, source_message_id, subject_id, conversation_id, event_at,
           content_hash, agent_id
    from ingest_stage
    on conflict (namespace, source, source_message_id) do nothing
    """
)
# The same without the conflict check, for chunks whose keys are all new (KeyClaims): a quarter less work
# for the database than ON CONFLICT's speculative insertion; a known key makes it fail (unique_violation).
INSERT_NEW_KEYS = text(
    """
    insert into message_keys (message_id, namespace, source, source_message_id, subject_id, conversation_id,
                              event_at, content_hash, agent_id)
    overriding system value
    select message_id, namespace, source, source_message_id, subject_id, conversation_id, event_at,
           content_hash, agent_id
    from ingest_stage
    """
)
# In file order, as staged. (Sorting a chunk into subject order first, so one scope's rows met the same
# index pages one after another, cost the database more than it saved: 0.5 s of its CPU per 200k rows.)
INSERT_ALL_MESSAGES = text(
    f"""
    insert into conversation_messages (message_id, {MESSAGE_COLUMNS}, fts, run_id)
    select s.message_id, {SELECT_MESSAGE_COLUMNS}, {FTS}, :run_id
    from ingest_stage s
    """
)
INSERT_NEW_MESSAGES = text(
    f"""
    insert into conversation_messages (message_id, {MESSAGE_COLUMNS}, fts, run_id)
    select s.message_id, {SELECT_MESSAGE_COLUMNS}, {FTS}, :run_id
    from ingest_stage s
    join message_keys k on k.message_id = s.message_id
    """
)
# Known keys whose content changed; keys whose L1 row expired stay expired. The keys are locked: a
# concurrent writer rewriting the same key finishes first, and this one then sees (and replaces) its row.
FIND_CHANGED = text(
    """
    insert into ingest_changed (message_id, old_event_at, namespace, source, source_message_id)
    select k.message_id, k.event_at, s.namespace, s.source, s.source_message_id
    from ingest_stage s
    join message_keys k using (namespace, source, source_message_id)
    where k.content_hash <> s.content_hash and k.expired_at is null
    for update of k
    """
)
REMOVE_CHANGED = text(
    """
    with removed as (
        delete from conversation_messages m
        using ingest_changed c
        where m.message_id = c.message_id and m.event_at = c.old_event_at
        returning m.message_id, m.ingested_at
    )
    update ingest_changed c set ingested_at = r.ingested_at from removed r where r.message_id = c.message_id
    """
)
REKEY_CHANGED = text(
    """
    update message_keys k
    set content_hash = s.content_hash, event_at = s.event_at, subject_id = s.subject_id,
        conversation_id = s.conversation_id, agent_id = s.agent_id
    from ingest_changed c
    join ingest_stage s using (namespace, source, source_message_id)
    where k.message_id = c.message_id
    """
)
INSERT_CHANGED = text(
    f"""
    insert into conversation_messages (message_id, {MESSAGE_COLUMNS}, fts, run_id, ingested_at, updated_at)
    select c.message_id, {SELECT_MESSAGE_COLUMNS}, {FTS}, :run_id, coalesce(c.ingested_at, now()), now()
    from ingest_changed c
    join ingest_stage s using (namespace, source, source_message_id)
    """
)
# Partitions for a chunk's UTC weeks, one call per distinct week (not the whole min..max range, which may be
# years apart), in week order (one lock order for every writer).
ENSURE_WEEKS = text(
    "select ensure_message_partitions(week, week) "
    "from unnest(cast(:weeks as timestamptz[])) as week order by week"
)
RESTORE_EXPIRED_KEYS = text(
    """
    insert into message_keys (namespace, source, source_message_id, subject_id, conversation_id, event_at,
                              content_hash, first_ingested_at, expired_at)
    select :namespace, k.* from unnest(
        cast(:source as text[]), cast(:source_message_id as text[]), cast(:subject_id as text[]),
        cast(:conversation_id as text[]), cast(:event_at as timestamptz[]), cast(:content_hash as text[]),
        cast(:first_ingested_at as timestamptz[]), cast(:expired_at as timestamptz[])
    ) as k
    on conflict (namespace, source, source_message_id) do nothing
    """
)
EXPIRED_KEY_FIELDS = (
    "source",
    "source_message_id",
    "subject_id",
    "conversation_id",
    "event_at",
    "content_hash",
    "first_ingested_at",
    "expired_at",
)


class KeyClaims:
    """How one bulk run's chunks claim their keys, in file order (pipeline.KeysTurn).

    While `optimistic`, a chunk first inserts its keys without a conflict check, in a savepoint: a first
    ingest's keys are all new, and that insert costs the database a quarter less than ON CONFLICT. The
    first chunk that meets a known key (its insert fails and is rolled back to the savepoint, or some of
    its keys were known) turns the run to ON CONFLICT for the chunks after it: a re-ingest of a changed
    file fails at most one such insert.
    """

    def __init__(self) -> None:
        self.optimistic = True


class ChunkCounts(BaseModel):
    read: int = 0
    inserted: int = 0
    updated: int = 0
    skipped: int = 0
    quarantined: int = 0


def write_chunk(
    conn: Connection,
    chunk: PreparedChunk,
    read: int,
    run_id: uuid.UUID | None,
    retention_days: int,
    *,
    partitions_ready: bool = False,
    keys_turn: AbstractContextManager[None] | None = None,
    claims: KeyClaims | None = None,
) -> ChunkCounts:
    """Stage and upsert one prepared chunk, quarantine its bad records (the caller owns the transaction).

    partitions_ready: the caller has already created the chunk's weekly partitions (ensure_weeks).
    keys_turn: entered around claiming the keys (inserting new ones, locking changed ones): the bulk
    pipeline's file order, strataflow/ingest/pipeline.py.
    claims: the run's KeyClaims (bulk runs); without it keys are inserted with ON CONFLICT.
    """
    counts = ChunkCounts(read=read, quarantined=len(chunk.quarantined), skipped=chunk.duplicates)
    write_quarantine(conn, run_id, chunk.quarantined)
    staged = chunk.staged or len(chunk.rows)  # a chunk built by hand may only have rows
    if not staged:
        return counts
    conn.execute(PREPARE_STAGE)
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    with cursor.copy(COPY_STAGE if chunk.vectors is None else COPY_STAGE_WITH_VECTORS) as copy:
        copy.write(chunk.payload)
    if not partitions_ready:
        ensure_weeks(conn, chunk.weeks or utc_week_starts(row[EVENT_AT] for row in chunk.rows))
    with keys_turn or nullcontext():  # claim new keys and lock changed ones
        counts.inserted = _insert_keys(conn, claims)
        changed = counts.inserted < staged and conn.execute(FIND_CHANGED).rowcount > 0
        if claims is not None and counts.inserted < staged:
            claims.optimistic = False
    if counts.inserted == staged:  # the common case of a first ingest
        conn.execute(INSERT_ALL_MESSAGES, {"run_id": run_id, "retention_days": retention_days})
    else:
        if counts.inserted:
            conn.execute(INSERT_NEW_MESSAGES, {"run_id": run_id, "retention_days": retention_days})
        if changed:
            conn.execute(REMOVE_CHANGED)
            conn.execute(REKEY_CHANGED)
            counts.updated = conn.execute(
                INSERT_CHANGED, {"run_id": run_id, "retention_days": retention_days}
            ).rowcount
    counts.skipped += staged - counts.inserted - counts.updated
    if run_id is not None and (counts.inserted or counts.updated):
        conn.execute(NOTE_RUN_NAMESPACES, {"run_id": run_id})
    return counts


def _insert_keys(conn: Connection, claims: KeyClaims | None) -> int:
    """Insert the staged keys that are new; how many were (KeyClaims)."""
    if claims is not None and claims.optimistic:
        try:
            with conn.begin_nested():
                return conn.execute(INSERT_NEW_KEYS).rowcount
        except IntegrityError as exc:
            if not isinstance(exc.orig, psycopg.errors.UniqueViolation):
                raise
            claims.optimistic = False
    return conn.execute(INSERT_KEYS).rowcount


def restore_expired_keys(conn: Connection, namespace: str, keys: list[dict[str, Any]]) -> int:
    """Add the keys (EXPIRED_KEY_FIELDS) of messages that expired in an exported namespace, unless the
    namespace has them; returns how many were added. The caller owns the transaction."""
    if not keys:
        return 0
    columns = {name: [key[name] for key in keys] for name in EXPIRED_KEY_FIELDS}
    return conn.execute(RESTORE_EXPIRED_KEYS, {"namespace": namespace, **columns}).rowcount


def ensure_weeks(conn: Connection, weeks: list[datetime]) -> None:
    """Create the weekly L1 partitions of these UTC weeks if missing (PreparedChunk.weeks)."""
    if weeks:
        conn.execute(ENSURE_WEEKS, {"weeks": weeks})
