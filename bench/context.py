"""Context and single-write latency at scale (issue 8): `python -m bench.context [--rows N] [--scopes S]`.

Loads N L1 messages (default 1,000,000 over 10,000 subjects; the access check uses 200,000) through the
real ingest path (strataflow.pipeline.ingest.ingest_logs: COPY into a staging table, set-based insert), gives
them synthetic embeddings (distinct sums of two vectors from a random pool, set with the HNSW index dropped,
which is then rebuilt after the load with maintenance_work_mem = 1GB), and adds L2 items (3 per subject) and
L3 weekly reports (1 per subject) with text, full-text vectors and embeddings. All of it in namespace
`bench_context`.

Then, after a warm-up, times:
- `context_*_ms`: the whole `strataflow.retrieval.context.build_context` call for a random subject and a
  question (classification, L2/L3 reads, embedding the query with the real model, hybrid retrieval, token
  budget);
- `wide_*_ms`: a namespace-wide search (no subject: every subject's rows, all four layers, k = 10, turn
  windows included) through `strataflow.retrieval.search.search`, query embedding included; wide scopes
  take the approximate path (strataflow.retrieval.wide);
- `write_*_ms`: one validated message written, without embedding: the ingest's validation and enrichment
  (`strataflow.ingest.enrich.prepare_chunk`: MessageRecord, language, intent, hash, full-text parts), then one
  insert of key and message (the batch path, `strataflow.pipeline.ingest.write_chunk`, stages through COPY and
  a temp table, which pays off for chunks, not for one record).
The context call's time is also split (bench.call_meter): `context_encode_*_ms` encoding texts (the query,
once per model it needs), `context_sql_*_ms` running statements (the two overlap: the query is encoded while
the first statements run), and `encodes_per_context`. `--reuse` keeps what an earlier run loaded in the same
home (same --rows and --scopes), to time two versions of the code on the same data; the timed calls are the
same either way.
Prints one JSON line last. Targets: context p95 <= 50 ms, wide p95 <= 100 ms, write p95 <= 10 ms.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import text

from strataflow.timeutil import WEEK, week_start

NAMESPACE = "bench_context"
POOL = 1000

PEOPLE = [
    "Alice",
    "Bob",
    "Chen Wei",
    "Dana",
    "Elena",
    "Farid",
    "Grace",
    "Hiro",
    "Ines",
    "Jonas",
    "Li Na",
    "Marco",
]
PROJECTS = [
    "billing dashboard",
    "mobile app",
    "data pipeline",
    "search service",
    "onboarding flow",
    "pricing page",
    "analytics warehouse",
    "support bot",
    "payments API",
    "recommendation model",
]
THINGS = [
    "release",
    "migration",
    "budget",
    "roadmap",
    "design review",
    "load test",
    "customer demo",
    "bug bash",
    "security audit",
    "hiring plan",
    "retro",
    "launch checklist",
]
PLACES = ["Berlin", "Shanghai", "Lisbon", "Toronto", "the office", "the client site", "Singapore", "Austin"]
DAYS = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "next week",
    "the end of the month",
    "tomorrow",
]
TEMPLATES = [
    "I met {person} about the {project} {thing} yesterday and we agreed to move it to {day}.",
    "Can you remind me what we decided about the {thing} for the {project}?",
    "The {project} {thing} slipped again; {person} thinks we need two more engineers before {day}.",
    "I'm flying to {place} on {day} for the {thing}, so please keep my calendar free.",
    "We finally shipped the {project} {thing}! {person} did most of the heavy lifting.",
    "My manager {person} wants a written summary of the {thing} by {day}.",
    "I prefer async updates over meetings for the {project}; a short note after each {thing} is enough.",
    "Our {thing} in {place} went well, but the {project} numbers still look weak.",
    "Please draft an email to {person} about moving the {thing} to {day}.",
    "I've been working late on the {project} all week and I'm exhausted.",
    "What did {person} say about the {project} {thing} last time?",
    "The {thing} budget for the {project} is about 40k, and finance wants it under 35k by {day}.",
]
QUESTIONS = [
    "What did we decide about the {project} {thing}?",
    "When is the {thing} for the {project}?",
    "What did {person} say about the {thing}?",
    "Where am I travelling for the {thing}?",
    "How is the {project} going?",
    "What happened last week?",
]
ITEMS = [
    ("fact", "company", "works at {place} office of Acme on the {project}"),
    ("preference", "meeting_style", "prefers async updates over meetings for the {project}"),
    ("intent", "next_goal", "wants to finish the {project} {thing} before {day}"),
]


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def fill(template: str, rng: random.Random) -> str:
    return template.format(
        person=rng.choice(PEOPLE),
        project=rng.choice(PROJECTS),
        thing=rng.choice(THINGS),
        place=rng.choice(PLACES),
        day=rng.choice(DAYS),
    )


def write_messages(path: Path, rows: int, scopes: int, rng: random.Random, end: datetime) -> None:
    """JSONL in the canonical message shape, spread over the 28 days before `end`."""
    with path.open("w", encoding="utf-8") as out:
        for i in range(rows):
            scope = i % scopes
            at = end - timedelta(seconds=rng.randrange(28 * 86400))
            record = {
                "conversation_id": f"c{scope}-{(i // scopes) // 20}",
                "subject_id": f"s{scope}",
                "source_message_id": f"m{i}",
                "role": "user" if i % 2 == 0 else "assistant",
                "content": fill(rng.choice(TEMPLATES), rng),
                "created_at": at.isoformat(),
            }
            out.write(json.dumps(record) + "\n")


def percentile(values: list[float], q: float) -> float:
    return round(float(np.percentile(np.array(values), q)), 2)


SQL_POOL = """
create temp table bench_pool (i int primary key, v vector(384));
"""
OWN_TABLES = ("conversation_messages", "message_keys", "memory_items", "weekly_reports", "watermarks")
SQL_EMBED_MESSAGES = """
update conversation_messages m
set embedding = a.v + b.v, embedding_model = 'synthetic'
from bench_pool a, bench_pool b
where m.namespace = :ns and a.i = m.message_id % 1000 and b.i = (m.message_id / 1000) % 1000
"""
# The HNSW indexes of the migrations, dropped during the bulk load and rebuilt after it (same definitions).
HNSW_INDEXES = {
    "conversation_messages_embedding_idx": "conversation_messages",
    "memory_items_embedding_idx": "memory_items",
    "weekly_reports_embedding_idx": "weekly_reports",
}
SQL_ITEMS = """
insert into memory_items (namespace, subject_id, kind, key, value, statement, importance, valid_from,
                          embedding,
                          embedding_model, fts)
select :ns, 's' || s, x.kind, x.key, to_jsonb(x.statement), x.statement, 70, now() - interval '3 days',
       a.v + b.v, 'synthetic', to_tsvector('english', x.statement) || to_tsvector('simple', '')
from generate_series(0, :scopes - 1) s
cross join lateral unnest(cast(:kinds as text[]), cast(:keys as text[]), cast(:statements as text[]))
    as x(kind, key, statement)
join bench_pool a on a.i = (s * 3) % 1000
join bench_pool b on b.i = (s * 7 + length(x.key)) % 1000
"""
SQL_REPORTS = """
insert into weekly_reports (namespace, subject_id, week_start, week_end, summary, input_hash, embedding,
                            embedding_model, fts)
select :ns, 's' || s, :week_start, :week_start + 6, :summary || ' (subject ' || s || ')', md5(s::text),
       a.v, 'synthetic', to_tsvector('english', :summary)
from generate_series(0, :scopes - 1) s join bench_pool a on a.i = s % 1000
"""


def load(
    settings: Any, rows: int, scopes: int, rng: random.Random, reuse: bool = False
) -> dict[str, float | bool]:
    """Messages through the real ingest path, then embeddings, the HNSW index, L2 items and L3 reports.
    `reuse`: keep what an earlier load left in this home when it has the same rows and scopes (timing two
    versions of the code on the same data)."""
    from strataflow.db.engine import engine_for
    from strataflow.pipeline.ingest import ingest_logs

    engine = engine_for(settings)
    if reuse and loaded_already(engine, rows, scopes):
        log(f"reusing the {rows:,} messages over {scopes:,} subjects loaded in this home before")
        return {"reused": True}
    end = datetime.now(UTC)
    started = time.perf_counter()
    with engine.begin() as conn:
        for table in OWN_TABLES:  # rows of an earlier run in the same home
            conn.execute(text(f"delete from {table} where namespace = :ns"), {"ns": NAMESPACE})
    with tempfile.TemporaryDirectory(prefix="bench-context-") as tmp:
        path = Path(tmp) / "messages.jsonl"
        write_messages(path, rows, scopes, rng, end)
        result = ingest_logs(settings, [path], namespace=NAMESPACE, progress=False)
    load_s = time.perf_counter() - started
    log(f"ingested {result.inserted} messages in {load_s:.1f} s")
    pool = np.random.default_rng(7).normal(size=(POOL, settings.embedding_dim)).astype(np.float32)
    pool /= np.linalg.norm(pool, axis=1, keepdims=True)
    started = time.perf_counter()
    with engine.begin() as conn:
        conn.execute(text(SQL_POOL))
        conn.execute(
            text("insert into bench_pool (i, v) values (:i, :v)"),
            [{"i": i, "v": v} for i, v in enumerate(pool)],
        )
        for index in HNSW_INDEXES:
            conn.execute(text(f"drop index if exists {index}"))
        conn.execute(text(SQL_EMBED_MESSAGES), {"ns": NAMESPACE})
        kinds, keys, statements = zip(*[(k, key, fill(s, rng)) for k, key, s in ITEMS], strict=True)
        conn.execute(
            text(SQL_ITEMS),
            {
                "ns": NAMESPACE,
                "scopes": scopes,
                "kinds": list(kinds),
                "keys": list(keys),
                "statements": list(statements),
            },
        )
        monday = week_start(end) - WEEK
        summary = "Weekly report: " + " ".join(fill(rng.choice(TEMPLATES), rng) for _ in range(4))
        conn.execute(
            text(SQL_REPORTS), {"ns": NAMESPACE, "scopes": scopes, "week_start": monday, "summary": summary}
        )
        log(f"embeddings, items and reports in {time.perf_counter() - started:.1f} s; building HNSW")
        conn.execute(text("set local maintenance_work_mem = '1GB'"))
        index_started = time.perf_counter()
        for index, table in HNSW_INDEXES.items():
            conn.execute(text(f"create index {index} on {table} using hnsw (embedding vector_cosine_ops)"))
        index_s = time.perf_counter() - index_started
        log(f"HNSW indexes built in {index_s:.1f} s")
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for table in ("conversation_messages", "message_keys", "memory_items", "weekly_reports"):
            conn.execute(text(f"vacuum analyze {table}"))
    return {
        "load_s": round(load_s, 1),
        "index_s": round(index_s, 1),
        "embed_and_extras_s": round(time.perf_counter() - started, 1),
    }


SQL_LOADED = """
select (select count(*) from message_keys where namespace = :ns and conversation_id <> 'live') as messages,
       (select count(distinct subject_id) from memory_items where namespace = :ns) as subjects,
       (select count(*) from pg_indexes where indexname = any(:indexes)) as indexes
"""


def loaded_already(engine: Any, rows: int, scopes: int) -> bool:
    """Whether the namespace holds `rows` loaded messages (the timed writes go to conversation 'live') and
    items of `scopes` subjects, with its HNSW indexes."""
    with engine.connect() as conn:
        found = conn.execute(text(SQL_LOADED), {"ns": NAMESPACE, "indexes": list(HNSW_INDEXES)}).one()
    return bool(found.messages == rows and found.subjects == scopes and found.indexes == len(HNSW_INDEXES))


def time_context(
    settings: Any, scopes: int, rng: random.Random, calls: int, warmup: int
) -> tuple[list[float], str, dict[str, float]]:
    """Milliseconds of whole build_context calls (query embedding included), after a warm-up, and where the
    time went (bench.call_meter: encode and SQL ms per call, encodes per call)."""
    from bench.call_meter import CallMeter
    from strataflow.db.engine import engine_for

    try:
        from strataflow.retrieval.context import build_context

        how = "strataflow.retrieval.context.build_context"
    except ImportError:  # the context builder not there: time the retrieval it would call
        from strataflow.retrieval.search import search

        how = "strataflow.retrieval.search.search (no context builder found)"

        def build_context(conn: Any, settings: Any, namespace: str, subject_id: str, query: str) -> Any:  # type: ignore[misc]
            return search(conn, settings, namespace, query, subject_id=subject_id)

    timings: list[float] = []
    parts: list[tuple[float, float, int]] = []
    meter = CallMeter(settings, engine_for(settings))
    with engine_for(settings).connect() as conn:
        for n in range(warmup + calls):
            subject = f"s{rng.randrange(scopes)}"
            query = fill(rng.choice(QUESTIONS), rng)
            meter.take()
            started = time.perf_counter()
            build_context(conn, settings, NAMESPACE, subject, query)
            conn.rollback()
            if n >= warmup:
                timings.append((time.perf_counter() - started) * 1000)
                parts.append(meter.take())
    encode_ms, sql_ms, encodes = (list(column) for column in zip(*parts, strict=True))
    split = {
        "context_encode_p50_ms": percentile(encode_ms, 50),
        "context_encode_p95_ms": percentile(encode_ms, 95),
        "context_sql_p50_ms": percentile(sql_ms, 50),
        "context_sql_p95_ms": percentile(sql_ms, 95),
        "encodes_per_context": round(sum(encodes) / len(encodes), 2),
    }
    return timings, how, split


def time_wide(settings: Any, rng: random.Random, calls: int, warmup: int) -> list[float]:
    """Milliseconds of namespace-wide searches (no subject), query embedding included, after a warm-up."""
    from strataflow.db.engine import engine_for
    from strataflow.retrieval.search import search

    timings = []
    with engine_for(settings).connect() as conn:
        for n in range(warmup + calls):
            query = fill(rng.choice(QUESTIONS), rng)
            started = time.perf_counter()
            hits = search(conn, settings, NAMESPACE, query, k=10)
            conn.rollback()
            if n >= warmup:
                timings.append((time.perf_counter() - started) * 1000)
            if not hits:
                raise RuntimeError(f"the namespace-wide search for {query!r} found nothing")
    return timings


INSERT_ONE_MESSAGE = """
with new_key as (
    insert into message_keys (namespace, source, source_message_id, subject_id, conversation_id, event_at,
                              content_hash)
    values (:namespace, :source, :source_message_id, :subject_id, :conversation_id, :event_at, :content_hash)
    on conflict (namespace, source, source_message_id) do nothing
    returning message_id
)
insert into conversation_messages (message_id, namespace, subject_id, agent_id, conversation_id, source,
    source_message_id, role, content, content_hash, lang, intent, event_at, expires_at, metadata, fts)
select new_key.message_id, :namespace, :subject_id, :agent_id, :conversation_id, :source, :source_message_id,
    :role, :content, :content_hash, :lang, :intent, :event_at,
    :event_at + make_interval(days => :retention_days), cast(:metadata as jsonb),
    to_tsvector('english', :fts_en) || to_tsvector('simple', :fts_zh)
from new_key
"""


def time_writes(settings: Any, scopes: int, rng: random.Random, calls: int, warmup: int) -> list[float]:
    """Milliseconds of one validated message write, without embedding: the ingest validation and enrichment
    (MessageRecord, language, intent, hash, full-text parts: strataflow.ingest.enrich.prepare_chunk) of one
    record, then its partition check and one insert statement (key + message), committed."""

    from strataflow.db.engine import engine_for
    from strataflow.ingest.enrich import STAGE_COLUMNS, ChunkOptions, prepare_chunk

    options = ChunkOptions(
        default_source="bench-write",
        tz=settings.tz,
        max_content_chars=settings.max_content_chars,
        retention_days=settings.retention_days,
        namespace=NAMESPACE,
    )
    insert, ensure = text(INSERT_ONE_MESSAGE), text("select ensure_message_partitions(:event_at, :event_at)")
    timings = []
    with engine_for(settings).connect() as conn:
        for n in range(warmup + calls):
            record = {
                "conversation_id": "live",
                "subject_id": f"s{rng.randrange(scopes)}",
                "source_message_id": f"w{n}-{uuid.uuid4().hex}",  # new in every run
                "role": "user",
                "content": fill(rng.choice(TEMPLATES), rng),
                "created_at": datetime.now(UTC).isoformat(),
            }
            started = time.perf_counter()
            chunk = prepare_chunk([(n, None, record)], options)
            if not chunk.rows:
                raise RuntimeError(f"the timed record did not validate: {chunk.quarantined}")
            row = {
                **dict(zip(STAGE_COLUMNS, chunk.rows[0], strict=True)),
                "retention_days": settings.retention_days,
            }
            conn.execute(ensure, row)
            inserted = conn.execute(insert, row).rowcount
            conn.commit()
            elapsed = (time.perf_counter() - started) * 1000
            if inserted != 1:
                raise RuntimeError("the timed write did not insert its message")
            if n >= warmup:
                timings.append(elapsed)
    return timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="L1 messages to load (default 1,000,000)")
    parser.add_argument("--scopes", type=int, default=10_000, help="subjects the messages spread over")
    parser.add_argument("--calls", type=int, default=200, help="timed calls of each kind")
    parser.add_argument(
        "--reuse", action="store_true", help="keep the rows an earlier run loaded in this home"
    )
    args = parser.parse_args(argv)
    from strataflow.config import load_settings
    from strataflow.db import migrations
    from strataflow.db.engine import engine_for
    from strataflow.llm.embeddings import get_embedder

    settings = load_settings()
    migrations.upgrade(engine_for(settings))
    rng = random.Random(42)
    scopes = max(1, min(args.scopes, args.rows))
    loaded = load(settings, args.rows, scopes, rng, reuse=args.reuse)
    rng = random.Random(43)  # the timed calls: the same whether the rows were loaded now or before
    get_embedder(settings).encode(["warm up the model"])
    context_ms, how, split = time_context(settings, scopes, rng, args.calls, warmup=20)
    wide_ms = time_wide(settings, rng, args.calls, warmup=10)
    write_ms = time_writes(settings, scopes, rng, args.calls, warmup=10)
    print(
        json.dumps(
            {
                "rows": args.rows,
                "scopes": scopes,
                "context_p50_ms": percentile(context_ms, 50),
                "context_p95_ms": percentile(context_ms, 95),
                **split,
                "wide_p50_ms": percentile(wide_ms, 50),
                "wide_p95_ms": percentile(wide_ms, 95),
                "write_p50_ms": percentile(write_ms, 50),
                "write_p95_ms": percentile(write_ms, 95),
                "context_call": how,
                **loaded,
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
