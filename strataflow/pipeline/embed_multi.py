"""Embed: the multilingual vector of every searched row (embedding_multi of memory_items, sql/400, and of
conversation_messages, weekly_reports and asset_chunks, sql/401), for the rows embedded before it existed, or
without settings, or under another multilingual model.

A row whose own embedding is not under the multilingual model (strataflow.memory.item_embedding.multi_model:
settings.embed_cjk_model; an English row's MiniLM vector) gets a second vector under it, compared with a
question in the other language (strataflow.retrieval.layer_sql); a CJK row's own vector is already under it.
The embed stage writes it with the row's own embedding (`multi_vectors`, strataflow.pipeline.embed), an item
write with the item (strataflow.memory.store), the asset ingest with the chunk (strataflow.pipeline.assets).
This backfill, part of every `strataflow embed` run after the embeddings themselves, fills it for the others:
pending is a row with an embedding under another model whose embedding_multi is missing or under another
multilingual model (after a change of STRATAFLOW_EMBED_CJK_MODEL). A row without one is searched as before in
its own space, so search works throughout.

Pages of PAGE_ROWS per table, by its keyset column: read (one connection, returned), encoded with no
connection held, written in one transaction by primary key, guarded by the text read (a row whose text
changed meanwhile keeps its null): an interrupted run keeps its pages, a rerun encodes nothing. The vectors
are encoded directly (no embedding_cache: its rows are the embeddings').
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
from sqlalchemy import Engine, text
from sqlalchemy.sql.elements import TextClause

from strataflow.config import Settings
from strataflow.llm.embeddings import get_embedder
from strataflow.memory.item_embedding import multi_model

PAGE_ROWS = 256
# The tables whose rows search compares across languages (strataflow.retrieval.layer_sql.LAYERS).
TABLES = ("conversation_messages", "memory_items", "weekly_reports", "asset_chunks")


class Target(Protocol):
    """A table of the embed stage (strataflow.pipeline.embed.EmbedTarget)."""

    @property
    def table(self) -> str: ...
    @property
    def cursor(self) -> str: ...
    @property
    def keys(self) -> tuple[str, ...]: ...
    @property
    def guards(self) -> tuple[str, ...]: ...


_PENDING = (
    "embedding is not null and embedding_model <> cast(:multi as text) "
    "and (embedding_multi is null or embedding_multi_model is distinct from cast(:multi as text)) "
    "and (cast(:namespace as text) is null or namespace = cast(:namespace as text))"
)


def count_sql(target: Target) -> TextClause:
    return text(f"select count(*) from {target.table} where {_PENDING}")


def row_columns(target: Target) -> tuple[str, ...]:
    """The columns a page reads to write a row back: keyset cursor, primary key, guards, namespace."""
    return tuple(dict.fromkeys((target.cursor, *target.keys, *target.guards, "namespace")))


def row_match(target: Target) -> str:
    """The WHERE of a page's UPDATE: the row by its key, unchanged since it was read (its guards)."""
    return " and ".join(
        [f"{key} = :{key}" for key in target.keys]
        + [f"{col} is not distinct from :{col}" for col in target.guards]
    )


def select_sql(target: Target, embedded_text: str) -> TextClause:
    return text(
        f"select {', '.join(row_columns(target))}, {embedded_text} as embedded_text from {target.table} "
        f"where {_PENDING} and {target.cursor} > :after order by {target.cursor} limit :limit"
    )


def update_sql(target: Target) -> TextClause:
    return text(
        f"update {target.table} set embedding_multi = cast(:vector as vector), "
        f"embedding_multi_model = :multi where {row_match(target)}"
    )


def multi_vectors(settings: Settings, texts: Sequence[str], models: Sequence[str]) -> list[np.ndarray | None]:
    """Each text's vector under the multilingual model when `models` (the one its own embedding is under)
    is another, else None; each distinct text encoded once, in one call. Call it with no connection held."""
    multi = multi_model(settings)
    wanted = sorted({t for t, model in zip(texts, models, strict=True) if multi and model != multi})
    if not wanted:
        return [None] * len(texts)
    encoded: Any = get_embedder(settings, multi).encode(wanted)
    by_text = {t: np.asarray(v, dtype=np.float32) for t, v in zip(wanted, encoded, strict=True)}
    return [by_text[t] if multi and model != multi else None for t, model in zip(texts, models, strict=True)]


def count_pending(
    engine: Engine, settings: Settings, targets: Sequence[Target], namespace: str | None = None
) -> dict[str, int]:
    """Rows waiting for their multilingual vector per table (none without a multilingual model)."""
    multi = multi_model(settings)
    if multi is None:
        return {}
    params = {"multi": multi, "namespace": namespace}
    with engine.connect() as conn:
        return {t.table: int(conn.execute(count_sql(t), params).scalar_one()) for t in targets}


def embed_multi(
    engine: Engine,
    settings: Settings,
    target: Target,
    embedded_text: str,
    namespace: str | None,
    advance: Callable[[int], None],
) -> dict[str, int]:
    """Fill every pending row's embedding_multi of one table (its text: the SQL `embedded_text`), page by
    page; rows written per namespace."""
    multi = multi_model(settings)
    written: dict[str, int] = {}
    if multi is None:
        return written
    embedder = get_embedder(settings, multi)
    select, update = select_sql(target, embedded_text), update_sql(target)
    after: Any = 0
    while True:
        with engine.connect() as conn:  # returned before the encode
            params: dict[str, Any] = {"multi": multi, "namespace": namespace, "after": after}
            rows = [dict(r._mapping) for r in conn.execute(select, {**params, "limit": PAGE_ROWS})]
        if not rows:
            return written
        vectors = embedder.encode([row["embedded_text"] for row in rows])
        updates = [
            {**{c: row[c] for c in (*target.keys, *target.guards)}, "vector": vector, "multi": multi}
            for row, vector in zip(rows, vectors, strict=True)
        ]
        with engine.begin() as conn:
            conn.execute(update, updates)
        for row in rows:
            written[row["namespace"]] = written.get(row["namespace"], 0) + 1
        after = rows[-1][target.cursor]
        advance(len(rows))
