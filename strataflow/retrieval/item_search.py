"""L2 items for a query, ranked by the one retrieval ranking (strataflow.retrieval.search over the items
layer: full text in English and Chinese, names and descriptions, dense similarity), with the one
agent-visibility rule applied inside the search; an item saved a second ago is found through its words (no
embedding needed). Both return the one row type of the memory API (models.memory_items.MemoryHit).

- `search_memories`: the memory search of every surface (CLI `memory search`, HTTP `POST
  /v1/memories/search`, MCP `memory_recall`, the adapters): the best matches, best first.
- `subject_memories`: a subject's items for a query, as the context builder and get_user_context show them:
  items the query points at by key or kind first (strataflow.retrieval.query_intent.key_hints: 公司/work ->
  company), then the ranking's order, then the rest by importance and recency, so the key facts are there
  even for a question that names none of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future

import numpy as np
from sqlalchemy import Connection, text

from models.memory_items import MemoryHit
from strataflow import telemetry
from strataflow.config import Settings
from strataflow.memory.api import ITEM_COLUMNS, visible_to_agent
from strataflow.memory.item_fields import checked_limit, hit_of, resolve_type
from strataflow.retrieval.layer_sql import ItemFilter
from strataflow.retrieval.search import search

MAX_SEARCH = 1000
SELECT_BY_IDS = text(
    f"""
    select {ITEM_COLUMNS} from memory_items as mi
    where mi.item_id = any(:ids) and mi.namespace = :namespace and mi.status = 'active'
        and mi.kind <> 'hot_summary' and (mi.expires_at is null or mi.expires_at > now())
        and ({visible_to_agent()} or mi.agent_id = any(cast(:also_visible as text[])))
        and (cast(:kind as text) is null or mi.kind = :kind)
    """
)
SELECT_SUBJECT_ITEMS = text(
    f"""
    select {ITEM_COLUMNS}, count(*) over () as total
    from memory_items as mi
    where mi.namespace = :namespace and mi.subject_id = :subject_id and mi.status = 'active'
        and mi.kind <> 'hot_summary' and {visible_to_agent()}
        and (mi.expires_at is null or mi.expires_at > now())
    order by (mi.key = any(:hint_keys) or mi.kind = any(:hint_kinds)) desc,
        array_position(cast(:ranked as bigint[]), mi.item_id) nulls last,
        mi.importance desc, mi.valid_from desc, mi.item_id
    limit :limit
    """
)


@telemetry.traced("search")
def search_memories(
    conn: Connection,
    settings: Settings,
    namespace: str,
    query: str,
    subject_id: str | None = None,
    *,
    agent_id: str | None = None,
    type: str | None = None,
    limit: int = 10,
    threshold: float | None = None,
    item_filter: ItemFilter | None = None,
    explain: bool = False,
) -> list[MemoryHit]:
    """The active items the agent sees that best match query (of one subject, or all), best first; `type`
    (a seed 003 type or a kind) keeps only that kind; `threshold` only those scoring at least that much;
    `item_filter` only those meeting its condition, in the search itself (strataflow.retrieval.search);
    `explain` gives each hit its score's parts (why it was recalled)."""
    checked_limit(limit, MAX_SEARCH)
    kind = resolve_type(type)[0] if type else None
    if not query.strip():
        return []
    found = search(
        conn, settings, namespace, query, subject_id=subject_id, layers=("items",),
        k=limit * 4 if kind else limit + 1, agent_id=agent_id, metadata=False, threshold=threshold,
        item_filter=item_filter, explain=explain,
    )  # fmt: skip
    scores = {hit.id: hit.score for hit in found}
    why = {hit.id: hit.explain for hit in found}
    params = {
        "namespace": namespace, "agent_id": agent_id, "kind": kind,
        "ids": list(scores), "also_visible": list(item_filter.also_visible) if item_filter else [],
    }  # fmt: skip
    rows = {row["item_id"]: row for row in conn.execute(SELECT_BY_IDS, params).mappings()}
    hits = [hit_of(rows[item_id], scores[item_id]) for item_id in scores if item_id in rows][:limit]
    return [hit.model_copy(update={"explain": why[hit.id]}) for hit in hits] if explain else hits


def subject_memories(
    conn: Connection,
    settings: Settings,
    namespace: str,
    subject_id: str,
    query: str,
    *,
    agent_id: str | None = None,
    limit: int = 20,
    hint_keys: Sequence[str] = (),
    hint_kinds: Sequence[str] = (),
    query_embedding: np.ndarray | Future[np.ndarray] | None = None,
) -> tuple[list[MemoryHit], int]:
    """At most `limit` of the subject's active items the agent sees, in the order of the module docstring,
    and how many there are. An item's score is the ranking's, 0 when the query reaches it by no measure."""
    found = search(
        conn, settings, namespace, query, subject_id=subject_id, layers=("items",), k=limit,
        query_embedding=query_embedding, agent_id=agent_id, metadata=False,
    ) if query.strip() else []  # fmt: skip
    scores = {hit.id: hit.score for hit in found}
    params = {
        "namespace": namespace, "subject_id": subject_id, "agent_id": agent_id, "ranked": list(scores),
        "hint_keys": list(hint_keys), "hint_kinds": list(hint_kinds), "limit": limit,
    }  # fmt: skip
    rows = conn.execute(SELECT_SUBJECT_ITEMS, params).mappings().all()
    hits = [hit_of(row, scores.get(row["item_id"], 0.0)) for row in rows]
    return hits, int(rows[0]["total"]) if rows else 0
