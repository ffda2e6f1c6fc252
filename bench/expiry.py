"""Expiry benchmark: dropping weekly partitions vs DELETE + VACUUM on an unpartitioned copy.

    python -m bench.expiry [--rows 1000000] [--keep]

Two tables in schema bench_expiry with the L1 columns (created LIKE conversation_messages) and its indexes
except the HNSW index: `messages_partitioned` (weekly range partitions, like conversation_messages) and
`messages_plain`. Both get the same N rows spread evenly over 60 days, so that 30 days of them have
expired at the benchmark's "now"; the 30-day cutoff falls on a Monday, so every expired row sits in a
partition that has expired whole. Then, in the same run:
- drop_s: detach + drop the expired partitions (one transaction);
- delete_s: DELETE the same rows from the plain table; vacuum_s: plain VACUUM of it afterwards;
- ratio = (delete_s + vacuum_s) / drop_s;
- size_share = bytes of the partitioned table / bytes of the plain table after expiry (pg_total_relation_size
  with indexes and TOAST, summed over the remaining partitions). Plain VACUUM keeps the file sizes (the
  freed space is reused by later inserts, not returned), which is what a production table would see.
The embedding column is present but left null: loading 2 x 1M 384-d vectors would add about 3 GB and many
minutes; null vectors make the DELETE side cheaper, so the ratio is conservative. Autovacuum is off on
both tables so that only the measured statements run. Progress goes to stderr; the last stdout line is JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, Engine, text

from strataflow.timeutil import mondays, week_bounds, week_start

SCHEMA = "bench_expiry"
SPAN_DAYS = 60
EXPIRE_DAYS = 30
CUTOFF = datetime(2026, 1, 5, tzinfo=UTC)  # a Monday: every expired row lies in a whole expired week
TOPICS = "array['deploy','budget','travel','visa','hiring','schema','pricing','roadmap','outage','invoice']"

INDEXES = (  # the L1 indexes of sql/003 except the HNSW one (name suffix, definition)
    ("scope_time", "(namespace, subject_id, event_at)"),
    ("seq", "(namespace, subject_id, ingest_seq)"),
    ("conversation", "(namespace, conversation_id, event_at)"),
    ("expires", "(expires_at)"),
    ("fts", "using gin (fts)"),
    ("unembedded", "(ingest_seq) where embedding is null"),
)


def log(message: str) -> None:
    print(f"[bench.expiry] {message}", file=sys.stderr, flush=True)


def create_tables(conn: Connection, start: datetime, end: datetime) -> list[str]:
    """Both tables (no rows yet) and the weekly partitions covering [start, end); returns partition names."""
    conn.execute(text(f"drop schema if exists {SCHEMA} cascade"))
    conn.execute(text(f"create schema {SCHEMA}"))
    like = "like public.conversation_messages including defaults including constraints"
    conn.execute(text(f"create table {SCHEMA}.messages_partitioned ({like}) partition by range (event_at)"))
    conn.execute(text(f"create table {SCHEMA}.messages_plain ({like}) with (autovacuum_enabled = false)"))
    names = []
    for monday in mondays(week_start(start, UTC), end.astimezone(UTC).date()):
        week_from, week_until = week_bounds(monday, UTC)
        if week_from >= end:
            break
        name = "messages_w" + monday.strftime("%G_%V")
        conn.execute(
            text(
                f"create table {SCHEMA}.{name} partition of {SCHEMA}.messages_partitioned "
                f"for values from ('{week_from.isoformat()}') to ('{week_until.isoformat()}') "
                "with (autovacuum_enabled = false)"
            )
        )
        names.append(name)
    return names


def load_rows(conn: Connection, rows: int, start: datetime) -> None:
    """N rows, evenly spread over SPAN_DAYS from start (never exactly on the cutoff), then an exact copy."""
    conn.execute(
        text(
            f"""
            insert into {SCHEMA}.messages_partitioned
                (message_id, namespace, subject_id, conversation_id, source, source_message_id, role, content,
                 content_hash, lang, intent, event_at, expires_at, ingest_seq, fts)
            select g, 'bench_expiry', 'subject_' || (g % 500), 'conv_' || (g % 20000), 'bench.jsonl', g::text,
                   case when g % 2 = 0 then 'user' else 'assistant' end, body,
                   md5(body) || md5(g::text), 'en', 'statement', at,
                   at + make_interval(days => :expire_days), g,
                   to_tsvector('english', body)
            from (
                select g,
                       'Message ' || g || ' about the ' || ({TOPICS})[g % 10 + 1]
                       || ' plan: we agreed to review '
                       || ({TOPICS})[(g / 7) % 10 + 1] || ' numbers with the team next week.' as body,
                       cast(:start as timestamptz) + make_interval(secs => (g + 0.5) * :step_s) as at
                from generate_series(0, :rows - 1) as g
            ) as src
            """
        ),
        {"rows": rows, "start": start, "step_s": SPAN_DAYS * 86400 / rows, "expire_days": EXPIRE_DAYS},
    )
    conn.execute(text(f"insert into {SCHEMA}.messages_plain select * from {SCHEMA}.messages_partitioned"))


def create_indexes(conn: Connection) -> None:
    for table in ("messages_partitioned", "messages_plain"):
        conn.execute(text(f"alter table {SCHEMA}.{table} add primary key (message_id, event_at)"))
        for suffix, definition in INDEXES:
            conn.execute(text(f"create index {table}_{suffix}_idx on {SCHEMA}.{table} {definition}"))


def table_bytes(conn: Connection) -> tuple[int, int]:
    partitioned = conn.execute(
        text(
            "select coalesce(sum(pg_total_relation_size(relid)), 0) "
            f"from pg_partition_tree('{SCHEMA}.messages_partitioned') where isleaf"
        )
    ).scalar_one()
    plain = conn.execute(text(f"select pg_total_relation_size('{SCHEMA}.messages_plain')")).scalar_one()
    return int(partitioned), int(plain)


def count(conn: Connection, table: str) -> int:
    return int(conn.execute(text(f"select count(*) from {SCHEMA}.{table}")).scalar_one())


def run(engine: Engine, rows: int, keep: bool) -> dict[str, object]:
    start = CUTOFF - timedelta(days=EXPIRE_DAYS)
    now = CUTOFF + timedelta(days=EXPIRE_DAYS)
    t0 = time.perf_counter()
    with engine.begin() as conn:
        conn.execute(text("set local maintenance_work_mem = '512MB'"))
        names = create_tables(conn, start, start + timedelta(days=SPAN_DAYS))
        log(f"loading {rows:,} rows into {len(names)} weekly partitions and the plain copy")
        load_rows(conn, rows, start)
        log("creating the L1 indexes (no HNSW) on both tables")
        create_indexes(conn)
    autocommit = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
    with autocommit as conn:
        conn.execute(text(f"vacuum analyze {SCHEMA}.messages_partitioned, {SCHEMA}.messages_plain"))
        before_partitioned, before_plain = table_bytes(conn)
        expired = [
            name
            for name in names
            if conn.execute(
                text(f"select count(*) = 0 from {SCHEMA}.{name} where expires_at > :now"), {"now": now}
            ).scalar_one()
        ]
        expired_rows = sum(count(conn, name) for name in expired)
    log(
        f"loaded in {time.perf_counter() - t0:.1f}s; "
        f"expiring {expired_rows:,} rows ({len(expired)} partitions)"
    )

    with engine.begin() as conn:
        t = time.perf_counter()
        for name in expired:
            conn.execute(text(f"alter table {SCHEMA}.messages_partitioned detach partition {SCHEMA}.{name}"))
            conn.execute(text(f"drop table {SCHEMA}.{name}"))
    drop_s = time.perf_counter() - t
    log(f"partition drop: {drop_s:.3f}s")

    with engine.begin() as conn:
        t = time.perf_counter()
        deleted = conn.execute(
            text(f"delete from {SCHEMA}.messages_plain where expires_at <= :now"), {"now": now}
        ).rowcount
    delete_s = time.perf_counter() - t
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        t = time.perf_counter()
        conn.execute(text(f"vacuum {SCHEMA}.messages_plain"))
        vacuum_s = time.perf_counter() - t
        log(f"delete: {delete_s:.3f}s ({deleted:,} rows), vacuum: {vacuum_s:.3f}s")
        after_partitioned, after_plain = table_bytes(conn)
        left_partitioned, left_plain = count(conn, "messages_partitioned"), count(conn, "messages_plain")
        if not keep:
            conn.execute(text(f"drop schema {SCHEMA} cascade"))
    if deleted != expired_rows or left_partitioned != left_plain:
        raise SystemExit(
            f"tables disagree: deleted {deleted} vs dropped {expired_rows}; "
            f"left {left_partitioned} vs {left_plain}"
        )
    return {
        "rows": rows,
        "expired_rows": expired_rows,
        "remaining_rows": left_plain,
        "partitions_dropped": len(expired),
        "drop_s": round(drop_s, 4),
        "delete_s": round(delete_s, 4),
        "vacuum_s": round(vacuum_s, 4),
        "ratio": round((delete_s + vacuum_s) / drop_s, 2),
        "size_share": round(after_partitioned / after_plain, 3),
        "partitioned_bytes": after_partitioned,
        "delete_table_bytes": after_plain,
        "bytes_before": {"partitioned": before_partitioned, "plain": before_plain},
        "hnsw_index": False,
        "embedding_loaded": False,
        "note": "L1 columns and indexes without the HNSW index; embedding column null (not loaded); "
        "size after expiry incl. indexes and TOAST; plain VACUUM (no VACUUM FULL) on the DELETE table",
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows per table (default 1,000,000)")
    parser.add_argument("--keep", action="store_true", help="keep schema bench_expiry afterwards")
    args = parser.parse_args(argv)
    if args.rows < 1000:
        parser.error("--rows must be at least 1000")

    from strataflow.config import load_settings
    from strataflow.db import migrations
    from strataflow.db.engine import engine_for

    settings = load_settings()
    engine = engine_for(settings)
    migrations.upgrade(engine)  # a fresh STRATAFLOW_HOME: create and migrate the database first
    result = run(engine, args.rows, args.keep)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
