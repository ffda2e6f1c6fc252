"""Searching L2 items with the one retrieval ranking (strataflow.retrieval.search over the items layer: full
text in English and Chinese, names, descriptions, dense similarity), the agent's visibility applied inside
the search; an item saved a second ago is found (no embedding needed). `search_memories` answers the CLI's
memory items, `search_entries` the seed 003 entries of HTTP and MCP."""

from __future__ import annotations

from sqlalchemy import Connection, text

from models.entries import EntryHit
from strataflow.config import Settings
from strataflow.memory.api import (
    ITEM_COLUMNS,
    SCOPE_FILTER,
    MemoryHit,
    MemoryItem,
    normalize_kind,
    scope_params,
)
from strataflow.memory.entry_fields import EntryFieldError, hit_of, resolve_type
from strataflow.retrieval.search import search

SELECT_BY_IDS = text(
    f"""
    select {ITEM_COLUMNS} from memory_items as mi
    where mi.item_id = any(:ids) and {SCOPE_FILTER} and mi.kind <> 'hot_summary'
    """
)


def search_memories(
    conn: Connection,
    settings: Settings,
    namespace: str,
    query: str,
    subject_id: str | None = None,
    *,
    agent_id: str | None = None,
    kind: str | None = None,
    k: int = 10,
) -> list[MemoryHit]:
    """Active items best matching query, best first: the one retrieval ranking (strataflow.retrieval.search
    over the items layer: full text in English and Chinese, names, descriptions, dense similarity), with
    the agent's visibility applied inside the search."""
    if not query.strip():
        return []
    kind = kind and normalize_kind(kind)
    found = search(
        conn, settings, namespace, query, subject_id=subject_id, layers=("items",),
        k=k * 4 if kind else k, agent_id=agent_id,
    )  # fmt: skip
    scores = {int(hit.id): hit.score for hit in found}
    params = scope_params(namespace, subject_id, agent_id, kind, False) | {"ids": list(scores)}
    items = {row["item_id"]: MemoryItem(**row) for row in conn.execute(SELECT_BY_IDS, params).mappings()}
    ranked = [items[item_id] for item_id in scores if item_id in items][:k]
    return [MemoryHit(score=round(scores[item.item_id], 6), item=item) for item in ranked]


def search_entries(
    conn: Connection,
    settings: Settings,
    namespace: str,
    query: str,
    subject_id: str | None = None,
    *,
    agent_id: str | None = None,
    entry_type: str | None = None,
    limit: int = 10,
) -> list[EntryHit]:
    """The entries that best match query, best first (see the module docstring for the ranking)."""
    if not 1 <= limit <= 100:
        raise EntryFieldError("limit", f"limit must be between 1 and 100, got {limit}")
    kind = resolve_type(entry_type)[0] if entry_type else None
    if not query.strip():
        return []
    hits = search_memories(
        conn, settings, namespace, query, subject_id, agent_id=agent_id, kind=kind, k=limit
    )  # fmt: skip
    return [hit_of(hit.item, hit.score) for hit in hits]
