"""Online writes (seed 001 saveConversation, POST /v1/messages): a few messages into L1 now, with the batch
ingest's own validation, enrichment, quarantine and rewrite rules.

Each record is validated as the canonical message (models.messages.MessageRecord) and enriched by
strataflow.ingest.enrich.prepare_chunk (language, intent, hash, full-text parts); invalid records go to the
quarantine table with the field they name (strataflow.ingest.quarantine). Valid messages are written
with set-based statements of their own, not staging's COPY path: that path stages through session temp
tables, which pays off for chunks, not for one message (a commit that touched the temp tables costs several
milliseconds here), and it sets message ids itself, which an agent role may not (sql/101). The rules are the
batch ingest's: a new key inserts its message; a known key with the same content changes nothing; a known
key with new content is rewritten (same id, new content and ingest_seq, embedding cleared, possibly another
partition), so extraction takes it again; a key whose L1 row expired is never brought back. So a write is
idempotent on (namespace, source, source_message_id) exactly like a re-ingest. The namespace is the
caller's (a record's own `namespace` is ignored); `source` defaults to "api".

A written message is found at once by context and search through its full-text vector. Its embedding is left
to the next embed run (`strataflow embed`, or the nightly flow, which also extracts L2 from it exactly once:
extraction follows ingest order, and an online write takes the next ingest_seq like any ingest).

The write window: a record's created_at must lie within [now - STRATAFLOW_API_WRITE_PAST_DAYS (the retention
by default), now + STRATAFLOW_API_WRITE_FUTURE_DAYS (1)], and its subject id may hold no '/' and no control
character; a record that breaks either is quarantined naming the field (422 when every record does), and a
request whose valid records fall in more than STRATAFLOW_API_WRITE_MAX_WEEKS distinct weeks is refused whole
(WriteRefused, 422 naming created_at). The weekly partitions of the written times come from
ensure_online_message_partitions (sql/281): it runs as the owner, only for weeks inside the window the API
server set at start (online_write_window), at most max_weeks of them; agent roles may not create partitions
otherwise, nor delete L1 rows (a rewrite drops the old row through remove_rewritten_messages, which deletes
only rows whose key the caller has just re-keyed).

Durability: the transaction waits for its WAL flush (synchronous_commit on), so an acknowledged write
survives a crash of the database. STRATAFLOW_API_DURABLE_WRITES=false opts out (synchronous_commit off for
this transaction only): a write acknowledged less than a second before a database crash can then be lost,
never half-written (docs/operations.md has the measured cost of both).

The caller owns the transaction; under the service it runs as the API key's role, so row-level security
keeps the rows in the key's namespaces.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, Field
from sqlalchemy import Connection, text

from models.messages import RecordProblem
from strataflow import telemetry
from strataflow.config import Settings
from strataflow.ingest.enrich import STAGE_COLUMNS, ChunkOptions, prepare_chunk
from strataflow.ingest.quarantine import write_quarantine
from strataflow.ingest.readers import ReadItem
from strataflow.textsearch import TSVECTOR_SQL

DEFAULT_SOURCE = "api"
ASYNC_COMMIT = text("set local synchronous_commit = off")
ENSURE_PARTITIONS = text("select ensure_online_message_partitions(cast(:event_at as timestamptz[]))")
# The API server's window, for ensure_online_message_partitions (run by the owner at start: set_write_window).
SET_WRITE_WINDOW = text(
    """
    update online_write_window
    set past_days = :past_days, future_days = :future_days, max_weeks = :max_weeks, updated_at = now()
    """
)
_COLUMNS = ", ".join(STAGE_COLUMNS)
_ARRAYS = ", ".join(
    f"cast(:{name} as {'timestamptz' if name == 'event_at' else 'text'}[])" for name in STAGE_COLUMNS
)
MESSAGE_COLUMNS = """namespace, subject_id, agent_id, conversation_id, source, source_message_id, role,
    content, content_hash, lang, intent, event_at, expires_at, metadata, fts"""
MESSAGE_VALUES = f"""i.namespace, i.subject_id, i.agent_id, i.conversation_id, i.source, i.source_message_id,
    i.role, i.content, i.content_hash, i.lang, i.intent, i.event_at,
    i.event_at + make_interval(days => :retention_days), cast(i.metadata as jsonb),
    {TSVECTOR_SQL.format(en="i.fts_en", zh="i.fts_zh")}"""
# New keys and their messages in one statement; the last select reads message_keys as it was before it, so
# a known key shows its stored content hash (and whether its L1 row expired).
INSERT_NEW = text(
    f"""
    with incoming as (
        select * from unnest({_ARRAYS}) with ordinality as r({_COLUMNS}, n)
    ),
    new_keys as (
        insert into message_keys (namespace, source, source_message_id, subject_id, conversation_id, event_at,
                                  content_hash, agent_id)
        select namespace, source, source_message_id, subject_id, conversation_id, event_at, content_hash,
            agent_id
        from incoming
        on conflict (namespace, source, source_message_id) do nothing
        returning message_id, source, source_message_id
    ),
    new_messages as (
        insert into conversation_messages (message_id, {MESSAGE_COLUMNS})
        select k.message_id, {MESSAGE_VALUES}
        from new_keys as k
        join incoming as i using (source, source_message_id)
        returning message_id
    )
    select i.n, coalesce(k.message_id, old.message_id) as message_id,
        k.message_id is not null as inserted,
        old.message_id is not null and old.content_hash <> i.content_hash and old.expired_at is null
            as changed
    from incoming as i
    left join new_keys as k using (source, source_message_id)
    left join message_keys as old
        on old.namespace = i.namespace and old.source = i.source
            and old.source_message_id = i.source_message_id
    order by i.n
    """
)
# A rewrite: the key takes the new hash and event time, the old L1 row goes (it may sit in another partition;
# sql/281 deletes only rows whose key no longer matches them), the new row keeps the message id and its first
# ingest time. A transaction bound to an agent may re-key only that agent's messages (sql/442: 403 otherwise).
REMOVE_OLD = text("select message_id, ingested_at from remove_rewritten_messages(cast(:ids as bigint[]))")
REKEY = text(
    f"""
    update message_keys as k
    set content_hash = i.content_hash, event_at = i.event_at, subject_id = i.subject_id,
        conversation_id = i.conversation_id, agent_id = i.agent_id
    from unnest(cast(:ids as bigint[]), {_ARRAYS}) as i(message_id, {_COLUMNS})
    where k.message_id = i.message_id
    """
)
INSERT_REWRITTEN = text(
    f"""
    insert into conversation_messages (message_id, {MESSAGE_COLUMNS}, ingested_at, updated_at)
    select i.message_id, {MESSAGE_VALUES}, coalesce(i.ingested_at, now()), now()
    from unnest(cast(:ids as bigint[]), cast(:ingested_at as timestamptz[]), {_ARRAYS})
        as i(message_id, ingested_at, {_COLUMNS})
    """
)


class RejectedRecord(RecordProblem):
    """Why one record of the request was quarantined, and which one."""

    position: int = Field(description="the record's index in the request (0 for a single message)")


class WriteRefused(ValueError):
    """The whole request is refused (422); ``field`` names the field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


class OnlineWrite(BaseModel):
    """What a write did: accepted records (new, rewritten or already there) and quarantined ones."""

    accepted: int = Field(description="valid records: written now or already stored with this content")
    quarantined: int = Field(description="invalid records, written to the quarantine table")
    ids: list[int] = Field(description="message_id of each distinct accepted message, in request order")
    inserted: int = Field(description="messages new to L1")
    updated: int = Field(description="messages whose content changed and was rewritten")
    unchanged: int = Field(description="messages already stored with the same content")
    problems: list[RejectedRecord] = Field(default_factory=list, description="one per quarantined record")


@telemetry.traced("write")
def write_messages(
    conn: Connection, settings: Settings, namespace: str, records: list[dict[str, Any]]
) -> OnlineWrite:
    """Validate, enrich and write records (canonical messages) into L1 of namespace; quarantine bad ones
    (outside the write window too); WriteRefused when the valid ones span more than the allowed weeks."""
    options = ChunkOptions(
        default_source=DEFAULT_SOURCE,
        tz=settings.tz,
        max_content_chars=settings.max_content_chars,
        retention_days=settings.retention_days,
        namespace=namespace,
        event_window=write_window(settings),
        safe_subjects=True,
    )
    items: list[ReadItem] = [(position, None, record) for position, record in enumerate(records)]
    chunk = prepare_chunk(items, options)
    if len(chunk.weeks) > settings.api_write_max_weeks:
        raise WriteRefused(
            "created_at",
            f"the messages fall in {len(chunk.weeks)} distinct weeks; one request may write at most "
            f"{settings.api_write_max_weeks} (STRATAFLOW_API_WRITE_MAX_WEEKS): send them in several requests",
        )
    if not settings.api_durable_writes:
        conn.execute(ASYNC_COMMIT)
    write_quarantine(conn, None, chunk.quarantined)
    ids, inserted, changed = _insert_new(conn, chunk.rows, settings.retention_days)
    if changed:
        _rewrite(conn, changed, settings.retention_days)
    problems = [
        RejectedRecord(position=int(q["position"]), field=q["field"], reason=q["reason"], error=q["error"])
        for q in chunk.quarantined
    ]
    return OnlineWrite(
        accepted=len(records) - len(problems),
        quarantined=len(problems),
        ids=ids,
        inserted=inserted,
        updated=len(changed),
        unchanged=len(chunk.rows) - inserted - len(changed),
        problems=problems,
    )


def write_window(settings: Settings, now: datetime | None = None) -> tuple[datetime, datetime]:
    """[now - past days, now + future days]: the created_at an online write accepts."""
    now = now or datetime.now(UTC)
    return now - timedelta(days=_past_days(settings)), now + timedelta(days=settings.api_write_future_days)


def _past_days(settings: Settings) -> int:
    """How far back an online write may go: STRATAFLOW_API_WRITE_PAST_DAYS, else the retention."""
    return settings.api_write_past_days or settings.retention_days


def set_write_window(conn: Connection, settings: Settings) -> None:
    """Give ensure_online_message_partitions this server's window (the owner's connection, at start)."""
    conn.execute(
        SET_WRITE_WINDOW,
        {
            "past_days": _past_days(settings),
            "future_days": settings.api_write_future_days,
            "max_weeks": settings.api_write_max_weeks,
        },
    )


def _insert_new(
    conn: Connection, rows: list[tuple[Any, ...]], retention_days: int
) -> tuple[list[int], int, list[tuple[int, tuple[Any, ...]]]]:
    """Insert the rows whose key is new; (ids in row order, how many were new, (id, row) of changed ones)."""
    if not rows:
        return [], 0, []
    conn.execute(ENSURE_PARTITIONS, {"event_at": [row[STAGE_COLUMNS.index("event_at")] for row in rows]})
    found = conn.execute(INSERT_NEW, {**_columns(rows), "retention_days": retention_days}).all()
    changed = [(int(r.message_id), rows[r.n - 1]) for r in found if r.changed]
    return [int(r.message_id) for r in found], sum(r.inserted for r in found), changed


def _rewrite(conn: Connection, changed: list[tuple[int, tuple[Any, ...]]], retention_days: int) -> None:
    """Known messages with new content: the same id, the new content (see the module docstring)."""
    ids = [message_id for message_id, _ in changed]
    columns = _columns([row for _, row in changed])
    conn.execute(REKEY, {"ids": ids, **columns})
    first_ingested = dict(conn.execute(REMOVE_OLD, {"ids": ids}).tuples().all())
    ingested_at = [first_ingested.get(message_id) for message_id in ids]
    conn.execute(
        INSERT_REWRITTEN,
        {"ids": ids, "ingested_at": ingested_at, "retention_days": retention_days, **columns},
    )


def _columns(rows: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    """Rows (STAGE_COLUMNS order) as one array per column, the parameters of unnest."""
    return {name: [row[i] for row in rows] for i, name in enumerate(STAGE_COLUMNS)}
