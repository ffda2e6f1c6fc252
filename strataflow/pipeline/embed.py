"""Embed: fill the embedding of every row that has none (or, with reembed, one from another model).

Each row's model is strataflow.llm.embeddings.model_for_text of its embedded text (mostly-CJK text: the CJK
model, else the default one), recorded in its `embedding_model`. With reembed, a row is pending when its
recorded model is not the one its text gets now (MODEL_FOR_TEXT_SQL, the same rule in SQL): after a change of
STRATAFLOW_EMBEDDING_MODEL or STRATAFLOW_EMBED_CJK_MODEL, `strataflow embed --reembed` replaces those vectors
page by page; a row keeps its old vector (and model) until its page is written, so search, which compares a
row with the query's vector of the row's own model, works throughout.

Tables and the text embedded for one row (EMBEDDED_TEXT, SQL over the row's columns: the one place this is
decided; the embed stage reads it, and expiry and forget hash it to find the embedding_cache rows still in
use, embedding_cache_prune):
conversation_messages -> content as written (no speaker or time prefix: a retrieval recipe that wants one
is measured in the retrieval bench, and would change the text hash, so the cache, for every row);
memory_items (and their versions) -> strataflow.memory.item_embedding.ITEM_TEXT: the statement, trimmed (or
"key words: value" when there is none); an item is embedded when it is written, so this stage finds only
items written without settings;
weekly_reports (and their revisions) -> summary; insights -> statement; asset_chunks -> content.

One multilingual space (issue 44): a row of a searched table (embed_multi.TABLES: turns, items, reports,
chunks) whose own model is not the multilingual one (an English row's MiniLM) gets its vector under that
model in the same page and the same UPDATE (embedding_multi, sql/400 and sql/401), encoded after the page's
connection is returned; `embed_multi` then fills it for rows embedded before (with its own progress bar).

Rows are read in pages of PAGE_BATCHES x embed_batch_size (keyset on a unique, indexed column): cache
lookup, one encode call for the misses (the model batches them by `embed_batch_size` after sorting by
length, exactly as a direct `model.encode` over the same texts would), then, in one transaction per page on
a writer thread that overlaps the next page's encode, the cache insert and one executemany UPDATE by
primary key. An interrupted run keeps the pages it wrote. A rerun encodes nothing: no row is pending, and
a re-embed of known texts is served by embedding_cache.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, text
from sqlalchemy.sql.elements import TextClause

from models.results import EmbedResult
from strataflow.config import Settings
from strataflow.db.engine import engine_for
from strataflow.hashes import content_hash_sql
from strataflow.llm.embeddings import (
    CacheKey,
    embedding_models,
    model_for_text_sql,
    store_encoded,
    vectors_for,
)
from strataflow.memory.item_embedding import ITEM_TEXT, multi_model
from strataflow.pipeline import embed_multi
from strataflow.pipeline.progress import progress_bar

logger = logging.getLogger(__name__)

# Rows per page, in encode batches: a page lets the model sort its texts by length as a direct model.encode
# does (less padding); small pages keep the one write that cannot overlap an encode (the last) short.
PAGE_BATCHES = 4


# The text embedded for one row of a table, as SQL over the row's columns (prefixed by {r}, an alias and a
# dot, or nothing).
EMBEDDED_TEXT: dict[str, str] = {
    "conversation_messages": "{r}content",
    "memory_items": ITEM_TEXT,
    "memory_item_versions": ITEM_TEXT,  # what was embedded for an earlier version
    "weekly_reports": "{r}summary",
    "weekly_report_revisions": "{r}summary",
    "insights": "{r}statement",
    "asset_chunks": "{r}content",
}
# Tables that store content_hash(content) of their embedded text: their hash is that column.
STORED_HASH = frozenset({"conversation_messages", "asset_chunks", "message_keys"})


def embedded_text_sql(table: str, alias: str = "") -> str:
    """SQL of the text embedded for one row of table (columns qualified by alias, when given)."""
    return EMBEDDED_TEXT[table].format(r=f"{alias}." if alias else "")


def embedded_hash_sql(table: str, alias: str = "") -> str:
    """SQL of content_hash(the row's embedded text): the key of its embedding_cache row."""
    if table in STORED_HASH:
        return f"{alias}.content_hash" if alias else "content_hash"
    return content_hash_sql(embedded_text_sql(table, alias))


@dataclass(frozen=True)
class EmbedTarget:
    """One table with an embedding column: its keyset column, primary key, and the columns that must still
    hold the values read for the update to apply (a row whose text changed while its page was being encoded
    keeps a null embedding and is picked up by the next run). Its text is EMBEDDED_TEXT[table]."""

    table: str
    cursor: str
    keys: tuple[str, ...]
    guards: tuple[str, ...]


TARGETS: tuple[EmbedTarget, ...] = (
    EmbedTarget("conversation_messages", "ingest_seq", ("message_id", "event_at"), ("content_hash",)),
    EmbedTarget("memory_items", "item_id", ("item_id",), ("statement",)),
    EmbedTarget("weekly_reports", "report_id", ("report_id",), ("summary",)),
    EmbedTarget("insights", "insight_id", ("insight_id",), ("statement",)),
    EmbedTarget("asset_chunks", "chunk_id", ("chunk_id",), ("content_hash",)),
)

# Identifiers below come from TARGETS (constants); every value is a bound parameter.
_SCOPE = "(cast(:namespace as text) is null or namespace = cast(:namespace as text))"
# A row whose recorded model is not the one its text gets now (reembed), over the rows of _rows_sql.
_OTHER_MODEL = (
    f"(embedding is null or embedding_model is distinct from {model_for_text_sql('embedded_text')})"
)


def _rows_sql(target: EmbedTarget, columns: str) -> str:
    """The rows in scope with their embedded text, as a subquery for the reembed condition."""
    return (
        f"(select {columns}, embedding, embedding_model, {embedded_text_sql(target.table)} as embedded_text "
        f"from {target.table} where {_SCOPE}) as r"
    )


def _columns(target: EmbedTarget) -> str:
    multi = ("embedding_multi_model",) if target.table in embed_multi.TABLES else ()
    return ", ".join((*embed_multi.row_columns(target), *multi))


def _select_sql(target: EmbedTarget, reembed: bool) -> TextClause:
    columns = _columns(target)
    if reembed:
        return text(
            f"select {columns}, embedded_text from {_rows_sql(target, columns)} "
            f"where {_OTHER_MODEL} and {target.cursor} > :after order by {target.cursor} limit :limit"
        )
    return text(
        f"select {columns}, {embedded_text_sql(target.table)} as embedded_text "
        f"from {target.table} where embedding is null and {_SCOPE} "
        f"and {target.cursor} > :after order by {target.cursor} limit :limit"
    )


def _count_sql(target: EmbedTarget, reembed: bool) -> TextClause:
    if reembed:
        return text(f"select count(*) from {_rows_sql(target, _columns(target))} where {_OTHER_MODEL}")
    return text(f"select count(*) from {target.table} where embedding is null and {_SCOPE}")


def _update_sql(target: EmbedTarget, multi: bool = False) -> TextClause:
    """The UPDATE of a row's embedding (with `multi`, its multilingual vector too: embed_multi)."""
    also = ", embedding_multi = cast(:multi as vector), embedding_multi_model = :multi_model" if multi else ""
    return text(
        f"update {target.table} set embedding = :embedding, embedding_model = :model{also} "
        f"where {embed_multi.row_match(target)}"
    )


SELECT_PENDING = {(t.table, r): _select_sql(t, r) for t in TARGETS for r in (False, True)}
COUNT_PENDING = {(t.table, r): _count_sql(t, r) for t in TARGETS for r in (False, True)}
UPDATE_EMBEDDING = {t.table: _update_sql(t) for t in TARGETS}
UPDATE_WITH_MULTI = {t.table: _update_sql(t, True) for t in TARGETS if t.table in embed_multi.TABLES}


def embedding_cache_prune(candidates: str, going: Mapping[str, str]) -> TextClause:
    """The DELETE of the embedding_cache rows whose hash the SQL query `candidates` returns and that no row
    of an embedded table still needs (the cache is keyed by text only: another scope's row, or an asset
    chunk, may share the text). going[table] is a condition on that table's rows (alias r) that are about to
    go: they do not count."""
    still_used = []
    for target in TARGETS:
        condition = f"{embedded_hash_sql(target.table, 'r')} = e.content_hash"
        if target.table in going:
            condition += f" and not ({going[target.table]})"
        still_used.append(f"and not exists (select 1 from {target.table} as r where {condition})")
    return text(
        f"delete from embedding_cache as e where e.content_hash in ({candidates}) " + " ".join(still_used)
    )


def _model_params(settings: Settings) -> dict[str, str]:
    """The bound parameters of model_for_text_sql."""
    return {"embed_model": settings.embedding_model, "embed_cjk_model": settings.embed_cjk_model}


def count_pending(
    conn: Connection, settings: Settings, reembed: bool = False, namespace: str | None = None
) -> dict[str, int]:
    """Rows waiting for an embedding (with reembed: or for the one of the model their text gets now), per
    table."""
    params = {**_model_params(settings), "namespace": namespace}
    return {t.table: conn.execute(COUNT_PENDING[(t.table, reembed)], params).scalar_one() for t in TARGETS}


def read_page(
    conn: Connection,
    settings: Settings,
    target: EmbedTarget,
    after: Any,
    reembed: bool,
    namespace: str | None,
) -> list[dict[str, Any]]:
    """The next pending rows of one table after keyset position `after`."""
    params = {
        **_model_params(settings),
        "namespace": namespace,
        "after": after,
        "limit": settings.embed_batch_size * PAGE_BATCHES,
    }
    return [dict(r._mapping) for r in conn.execute(SELECT_PENDING[(target.table, reembed)], params)]


def write_page(
    conn: Connection,
    target: EmbedTarget,
    rows: list[dict[str, Any]],
    vectors: list[np.ndarray],
    models: list[str],
    new: dict[CacheKey, np.ndarray],
    multis: list[np.ndarray | None] | None = None,
    multi_name: str | None = None,
) -> None:
    """Store the newly encoded vectors in the cache; set each row's embedding and model (by primary key),
    and, given `multis`, its multilingual vector (None for a row whose own vector is multilingual)."""
    started = time.perf_counter()
    store_encoded(conn, new)
    updates = [
        {**{key: row[key] for key in (*target.keys, *target.guards)}, "embedding": vector, "model": model}
        for row, vector, model in zip(rows, vectors, models, strict=True)
    ]
    kept = updates
    if multis is not None:  # a row that keeps its multilingual vector (text unchanged) is not in multis
        with_multi = [
            {**update, "multi": multi, "multi_model": None if multi is None else multi_name}
            for update, multi, model in zip(updates, multis, models, strict=True)
            if multi is not None or model == multi_name
        ]
        if with_multi:
            conn.execute(UPDATE_WITH_MULTI[target.table], with_multi)
        kept = [u for u, v, m in zip(updates, multis, models, strict=True) if v is None and m != multi_name]
    if kept:
        conn.execute(UPDATE_EMBEDDING[target.table], kept)
    logger.debug("%s: wrote %d rows in %.2f s", target.table, len(rows), time.perf_counter() - started)


def embed_table(
    engine: Engine,
    settings: Settings,
    target: EmbedTarget,
    reembed: bool,
    namespace: str | None,
    result: EmbedResult,
    advance: Callable[[int], None],
) -> None:
    """Embed every pending row of one table, page by page.

    Page N's write (cache insert, UPDATE, its HNSW index entries, commit) runs in a second thread while
    page N+1 is encoded, so the database work mostly hides behind the model. Vectors encoded for page N
    are passed to page N+1's lookup, since they may not be committed yet.
    """
    after: Any = 0
    fresh: dict[CacheKey, np.ndarray] = {}
    multi = multi_model(settings) if target.table in embed_multi.TABLES else None
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed-writer") as writer:
        writing: Future[None] | None = None
        while True:
            with engine.connect() as conn:
                rows = read_page(conn, settings, target, after, reembed, namespace)
                if not rows:
                    break
                texts = [row["embedded_text"] for row in rows]
                vectors, models, new = vectors_for(conn, settings, texts, known=fresh)
            multis = _page_multis(settings, rows, texts, models, multi) if multi else None
            if writing is not None:
                writing.result()  # one write in flight at most; its error stops the stage here
            writing = writer.submit(
                _in_transaction, engine, write_page, target, rows, vectors, models, new, multis, multi
            )
            fresh, after = new, rows[-1][target.cursor]
            setattr(result, target.table, getattr(result, target.table) + len(rows))
            if multis is not None:
                written = sum(vector is not None for vector in multis)
                setattr(result, f"{target.table}_multi", getattr(result, f"{target.table}_multi") + written)
                result.encoded += len({t for t, v in zip(texts, multis, strict=True) if v is not None})
            for row in rows:
                counts = result.by_namespace.setdefault(row["namespace"], {})
                counts[target.table] = counts.get(target.table, 0) + 1
            result.encoded += len(new)
            result.cache_hits += len(rows) - len(new)
            advance(len(rows))
        if writing is not None:
            writing.result()


def _page_multis(
    settings: Settings, rows: list[dict[str, Any]], texts: list[str], models: list[str], multi: str
) -> list[np.ndarray | None]:
    """A page's multilingual vectors (embed_multi.multi_vectors), encoded with no connection held; a row
    whose multilingual vector is current (its own one re-embedded, its text unchanged) keeps it: None."""
    unlike = [
        multi if row["embedding_multi_model"] == multi else model
        for row, model in zip(rows, models, strict=True)
    ]
    return embed_multi.multi_vectors(settings, texts, unlike)


def _in_transaction(engine: Engine, work: Callable[..., None], *args: Any) -> None:
    with engine.begin() as conn:
        work(conn, *args)


def embed_pending(
    settings: Settings, reembed: bool = False, progress: bool = True, namespace: str | None = None
) -> EmbedResult:
    """Embed every pending row of the five tables (optionally one namespace), one transaction per page, with
    the multilingual vector of the searched rows; then those vectors for rows embedded without one
    (strataflow.pipeline.embed_multi: older rows, or a change of the multilingual model)."""
    engine = engine_for(settings)
    result = EmbedResult(model=" + ".join(embedding_models(settings)))
    with engine.connect() as conn:
        pending = count_pending(conn, settings, reembed, namespace)
    with progress_bar("embedding", sum(pending.values()), progress) as advance:
        for target in TARGETS:
            if pending[target.table]:
                embed_table(engine, settings, target, reembed, namespace, result, advance)
    searched = [target for target in TARGETS if target.table in embed_multi.TABLES]
    multi = embed_multi.count_pending(engine, settings, searched, namespace)
    with progress_bar("multilingual vectors", sum(multi.values()), progress) as advance:
        for target in searched:
            if multi.get(target.table):
                text_sql = embedded_text_sql(target.table)
                written = embed_multi.embed_multi(engine, settings, target, text_sql, namespace, advance)
                multi_count = f"{target.table}_multi"
                setattr(result, multi_count, getattr(result, multi_count) + sum(written.values()))
                result.encoded += sum(written.values())
    return result
