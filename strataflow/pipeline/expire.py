"""Expire: remove L1 rows past expires_at, by dropping whole weekly partitions where every row may go and by
deleting only the allowed rows of partitions that are still partly live.

Guard: a row may go only when a weekly report covers its week: a weekly_reports row for its scope and ISO
week (in STRATAFLOW_TIMEZONE) whose input_hash equals the week's current input hash
(strataflow/pipeline/rollup.py), so a week changed by a late backfill is covered again only after it is rolled
up again. `force` (with a reason, logged and recorded) lets uncovered rows go too. A partition holding any row
that must stay is never dropped. Rows of other namespaces in a partition keep it too when a run is limited to
one namespace.

Every run (dry runs included) writes one deletion_reports row: counts per namespace, partitions dropped,
oldest/newest event time removed, forced, reason. A dry run changes nothing else. Removed rows keep their
message_keys row (ids, content hash, times) with expired_at set, so L2/L3 lineage still resolves.
With settings.archive_expired, the rows (text and metadata; not the embedding, which the text regenerates)
are written to one Parquet file under settings.archive_dir before they go; forget rewrites archives.
The embedding_cache rows of the removed texts go too, unless a remaining row (a live L1 message, an L2 item,
an L3 report or insight, an asset chunk) has the same text: the cache keeps no text of expired messages.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import Connection, text

from models.lifecycle import ExpireResult
from strataflow.config import Settings
from strataflow.db.engine import engine_for
from strataflow.pipeline.deletion_reports import write_deletion_report
from strataflow.pipeline.embed import embedding_cache_prune
from strataflow.pipeline.scopes import WEEK_HASH_SQL
from strataflow.timeutil import week_bounds_sql, week_start_sql

logger = logging.getLogger(__name__)

ARCHIVE_BATCH_ROWS = 50_000
ARCHIVE_COLUMNS = (
    "message_id",
    "namespace",
    "subject_id",
    "agent_id",
    "conversation_id",
    "source",
    "source_message_id",
    "role",
    "content",
    "content_hash",
    "lang",
    "intent",
    "event_at",
    "ingested_at",
    "expires_at",
    "metadata",
)

WEEK_FROM, WEEK_UNTIL = week_bounds_sql("w.week_start")
CREATE_CANDIDATES = text(
    f"""
    create temp table expire_candidates on commit drop as
    select m.tableoid as partition_oid, m.message_id, m.event_at, m.namespace, m.subject_id,
           {week_start_sql("m.event_at")} as week_start,
           false as covered, false as allowed, false as dropped
    from conversation_messages as m
    where m.expires_at <= :now
      and (cast(:namespace as text) is null or m.namespace = cast(:namespace as text))
    """
)
MARK_COVERED = text(
    f"""
    with weeks as (
        select distinct namespace, subject_id, week_start from expire_candidates
    ),
    current_hashes as (
        select w.namespace, w.subject_id, w.week_start,
               (select {WEEK_HASH_SQL}
                from message_keys as k
                where k.namespace = w.namespace and k.subject_id = w.subject_id
                  and k.event_at >= {WEEK_FROM} and k.event_at < {WEEK_UNTIL}) as input_hash
        from weeks as w
    ),
    covered_weeks as (
        select h.namespace, h.subject_id, h.week_start
        from current_hashes as h
        join weekly_reports as r
          on r.namespace = h.namespace and r.subject_id = h.subject_id and r.week_start = h.week_start
         and r.input_hash = h.input_hash
    )
    update expire_candidates as c set covered = true, allowed = true
    from covered_weeks as w
    where c.namespace = w.namespace and c.subject_id = w.subject_id and c.week_start = w.week_start
    """
)
ALLOW_ALL = text("update expire_candidates set allowed = true")
SELECT_PARTITIONS = text(
    """
    select c.partition_oid, n.nspname as schema_name, p.relname as table_name,
           pg_get_expr(p.relpartbound, p.oid) = 'DEFAULT' as is_default,
           count(*) filter (where c.allowed) as allowed_rows
    from expire_candidates as c
    join pg_class as p on p.oid = c.partition_oid
    join pg_namespace as n on n.oid = p.relnamespace
    group by c.partition_oid, n.nspname, p.relname, p.relpartbound, p.oid
    order by p.relname
    """
)
MARK_DROPPED = text("update expire_candidates set dropped = true where partition_oid = any(:oids)")
SELECT_SUMMARY = text(
    """
    select namespace,
           count(*) as expired,
           count(*) filter (where allowed) as removed,
           count(*) filter (where allowed and dropped) as dropped,
           count(*) filter (where allowed and not dropped) as deleted,
           count(*) filter (where not allowed) as guarded,
           count(*) filter (where allowed and not covered) as forced,
           min(event_at) filter (where allowed) as oldest,
           max(event_at) filter (where allowed) as newest
    from expire_candidates
    group by namespace
    order by namespace
    """
)
SELECT_ARCHIVE_ROWS = text(
    """
    select m.message_id, m.namespace, m.subject_id, m.agent_id, m.conversation_id, m.source,
           m.source_message_id, m.role, m.content, m.content_hash, m.lang, m.intent, m.event_at,
           m.ingested_at, m.expires_at,
           m.metadata::text as metadata
    from conversation_messages as m
    join expire_candidates as c on c.message_id = m.message_id and c.event_at = m.event_at
    where c.allowed
    order by m.event_at, m.message_id
    """
)
MARK_KEYS_EXPIRED = text(
    """
    update message_keys as k set expired_at = :now
    from expire_candidates as c
    where c.allowed and k.message_id = c.message_id
    """
)
DELETE_ALLOWED = text(
    """
    delete from conversation_messages as m
    using expire_candidates as c
    where c.allowed and not c.dropped and m.message_id = c.message_id and m.event_at = c.event_at
    """
)
# The vectors of the removed messages' texts, where no remaining row has that text (the rows of partitions
# about to be dropped do not count; the other allowed rows are deleted by now).
PRUNE_EMBEDDING_CACHE = embedding_cache_prune(
    "select k.content_hash from expire_candidates as c join message_keys as k on k.message_id = c.message_id "
    "where c.allowed",
    going={"conversation_messages": "r.tableoid = any(cast(:dropped as oid[]))"},
)


def expire_rows(
    conn: Connection,
    settings: Settings,
    run_id: uuid.UUID,
    now: datetime,
    dry_run: bool = False,
    force: bool = False,
    reason: str | None = None,
    namespace: str | None = None,
) -> ExpireResult:
    """All the logic of one expiry run; the caller owns the transaction (dry run: only the report)."""
    if force and not (reason or "").strip():
        raise ValueError("expire: force needs a reason (it is logged and stored in the deletion report)")
    params = {"tz": settings.timezone, "now": now, "namespace": namespace}
    conn.execute(CREATE_CANDIDATES, params)
    conn.execute(MARK_COVERED, params)
    if force:
        logger.warning("expire: --force given (%s): rows of weeks without a covering report may go", reason)
        conn.execute(ALLOW_ALL)
    droppable = _droppable_partitions(conn, lock=not dry_run)
    conn.execute(MARK_DROPPED, {"oids": [oid for oid, _, _ in droppable]})
    result = _summarise(conn, dry_run, force, reason, [name for _, _, name in droppable])
    if not dry_run and result.removed_rows:
        if settings.archive_expired:
            result.archive_path = str(_archive(conn, settings.archive_dir, run_id, now))
        conn.execute(MARK_KEYS_EXPIRED, {"now": now})
        conn.execute(DELETE_ALLOWED)
        dropped = {"dropped": [oid for oid, _, _ in droppable]}
        result.embedding_cache_pruned = conn.execute(PRUNE_EMBEDDING_CACHE, dropped).rowcount
        # Last: detaching takes an ACCESS EXCLUSIVE lock on conversation_messages until commit; keep it short.
        for _, qualified, _ in droppable:
            conn.execute(text(f"alter table conversation_messages detach partition {qualified}"))
            conn.execute(text(f"drop table {qualified}"))
    result.report_id = write_deletion_report(
        conn,
        run_id,
        "expire",
        {"total": _totals(result), "by_namespace": result.by_namespace},
        namespace=namespace,
        dry_run=dry_run,
        forced=force,
        reason=reason,
        partitions_dropped=result.partitions_dropped,
        oldest_event_at=result.oldest_event_at,
        newest_event_at=result.newest_event_at,
        archive_path=result.archive_path,
    )
    return result


def _droppable_partitions(conn: Connection, lock: bool) -> list[tuple[int, str, str]]:
    """(oid, quoted qualified name, table name) of partitions whose every row is an allowed candidate (never
    the default partition)."""
    quote = conn.dialect.identifier_preparer.quote_identifier
    droppable = []
    for part in conn.execute(SELECT_PARTITIONS):
        if part.is_default or part.allowed_rows == 0:
            continue
        qualified = f"{quote(part.schema_name)}.{quote(part.table_name)}"
        if lock:  # no insert may slip in between the count and the drop
            conn.execute(text(f"lock table {qualified} in share row exclusive mode"))
        total = conn.execute(text(f"select count(*) from {qualified}")).scalar_one()
        if total == part.allowed_rows:
            droppable.append((part.partition_oid, qualified, part.table_name))
    return droppable


def _summarise(
    conn: Connection, dry_run: bool, force: bool, reason: str | None, dropped: list[str]
) -> ExpireResult:
    result = ExpireResult(dry_run=dry_run, forced=force, reason=reason, partitions_dropped=dropped)
    for row in conn.execute(SELECT_SUMMARY):
        result.by_namespace[row.namespace] = {
            "expired": row.expired,
            "removed": row.removed,
            "dropped": row.dropped,
            "deleted": row.deleted,
            "guarded": row.guarded,
            "forced": row.forced,
        }
        result.expired_rows += row.expired
        result.removed_rows += row.removed
        result.dropped_rows += row.dropped
        result.deleted_rows += row.deleted
        result.guarded_rows += row.guarded
        if row.oldest is not None:
            result.oldest_event_at = min(filter(None, (result.oldest_event_at, row.oldest)))
            result.newest_event_at = max(filter(None, (result.newest_event_at, row.newest)))
    return result


def _totals(result: ExpireResult) -> dict[str, int]:
    return {
        "expired": result.expired_rows,
        "removed": result.removed_rows,
        "dropped": result.dropped_rows,
        "deleted": result.deleted_rows,
        "guarded": result.guarded_rows,
        "partitions_dropped": len(result.partitions_dropped),
        "embedding_cache_pruned": result.embedding_cache_pruned,
    }


def _archive(conn: Connection, archive_dir: Path, run_id: uuid.UUID, now: datetime) -> Path:
    """Write the rows about to go to one Parquet file, in batches; return its path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    directory = archive_dir / "expired"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"expired_{now.strftime('%Y%m%dT%H%M%SZ')}_{run_id.hex[:8]}.parquet"
    writer = None
    try:
        schema = pa.schema(
            [
                (name, pa.int64())
                if name == "message_id"
                else (name, pa.timestamp("us", tz="UTC"))
                if name.endswith("_at")
                else (name, pa.string())
                for name in ARCHIVE_COLUMNS
            ]
        )
        rows = conn.execute(SELECT_ARCHIVE_ROWS.execution_options(yield_per=ARCHIVE_BATCH_ROWS))
        for batch in rows.partitions():
            table = pa.Table.from_pylist([dict(row._mapping) for row in batch], schema=schema)
            if writer is None:
                writer = pq.ParquetWriter(path, schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()
    return path


def expire_l1(
    settings: Settings,
    dry_run: bool = False,
    force: bool = False,
    reason: str | None = None,
    run_id: uuid.UUID | None = None,
    namespace: str | None = None,
    now: datetime | None = None,
) -> ExpireResult:
    """Expire L1 rows past expires_at that the guard allows (all of them with force), in one transaction."""
    with engine_for(settings).begin() as conn:
        return expire_rows(
            conn,
            settings,
            run_id or uuid.uuid4(),
            now or datetime.now(UTC),
            dry_run=dry_run,
            force=force,
            reason=reason,
            namespace=namespace,
        )
