"""Embed: the multilingual vector of L2 items (memory_items.embedding_multi, sql/400), for the items written
before it existed, or without settings, or under another multilingual model.

An item whose own embedding is not under the multilingual model (strataflow.memory.item_embedding.multi_model:
settings.embed_cjk_model; an English item's MiniLM vector) gets a second vector under it, compared with a
question in the other language (strataflow.retrieval.layer_sql). A write makes it (strataflow.memory.store);
this stage, part of every `strataflow embed` run after the embeddings themselves (so an item the run has just
embedded is done too), fills it for the others: pending is an item with an embedding under another model
whose embedding_multi is missing or under another multilingual model (after a change of
STRATAFLOW_EMBED_CJK_MODEL). An item without one is searched as before in its own space, so search works
throughout.

Pages of PAGE_ITEMS by item id: read (one connection, returned), encoded with no connection held, written in
one transaction by primary key, guarded by the statement read (an item whose statement changed meanwhile keeps
its null, and the trigger of sql/400 cleared any old one): an interrupted run keeps its pages, a rerun encodes
nothing. The vectors are encoded directly, not looked up in or added to embedding_cache.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, text

from strataflow.config import Settings
from strataflow.llm.embeddings import get_embedder
from strataflow.memory.item_embedding import ITEM_TEXT, multi_model

PAGE_ITEMS = 256
_PENDING = (
    "embedding is not null and embedding_model <> cast(:multi as text) "
    "and (embedding_multi is null or embedding_multi_model is distinct from cast(:multi as text)) "
    "and (cast(:namespace as text) is null or namespace = cast(:namespace as text))"
)
COUNT_PENDING = text(f"select count(*) from memory_items where {_PENDING}")
SELECT_PAGE = text(
    f"select item_id, namespace, statement, {ITEM_TEXT.format(r='')} as embedded_text from memory_items "
    f"where {_PENDING} and item_id > :after order by item_id limit :limit"
)
UPDATE_MULTI = text(
    "update memory_items set embedding_multi = cast(:vector as vector), embedding_multi_model = :multi "
    "where item_id = :item_id and statement is not distinct from :statement"
)


def count_pending(engine: Engine, settings: Settings, namespace: str | None = None) -> int:
    """Items waiting for their multilingual vector (0 without a multilingual model)."""
    multi = multi_model(settings)
    if multi is None:
        return 0
    with engine.connect() as conn:
        return int(conn.execute(COUNT_PENDING, {"multi": multi, "namespace": namespace}).scalar_one())


def embed_multi(
    engine: Engine, settings: Settings, namespace: str | None, advance: Callable[[int], None]
) -> dict[str, int]:
    """Fill every pending item's embedding_multi, page by page; rows written per namespace."""
    multi = multi_model(settings)
    written: dict[str, int] = {}
    if multi is None:
        return written
    embedder = get_embedder(settings, multi)
    after = 0
    while True:
        with engine.connect() as conn:  # returned before the encode
            params: dict[str, Any] = {"multi": multi, "namespace": namespace, "after": after}
            rows = conn.execute(SELECT_PAGE, {**params, "limit": PAGE_ITEMS}).all()
        if not rows:
            return written
        vectors = embedder.encode([row.embedded_text for row in rows])
        updates = [
            {"item_id": row.item_id, "statement": row.statement, "vector": vector, "multi": multi}
            for row, vector in zip(rows, vectors, strict=True)
        ]
        with engine.begin() as conn:
            conn.execute(UPDATE_MULTI, updates)
        for row in rows:
            written[row.namespace] = written.get(row.namespace, 0) + 1
        after = rows[-1].item_id
        advance(len(rows))
