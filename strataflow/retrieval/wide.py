"""Candidates for a wide scope (more rows than strataflow.retrieval.search scores exactly, e.g. a whole
namespace without a subject): the rows worth scoring, found through the indexes, then scored like an exact
scope's rows.

Per layer:
- dense: the HNSW nearest rows in scope, over-fetched (``OVERFETCH`` x k, at least ``MIN_CANDIDATES``) with
  ``hnsw.ef_search`` raised to match; when the filter starves the scan (pgvector 0.6 filters after the scan),
  an exact scan of the scope instead;
- full text: the rows with every query word, then the best matches of any word, each pass ranking at most
  ``TEXT_POOL`` GIN matches so a common word costs little;
- messages: the turns around each candidate (``NEIGHBOURS`` on each side, same conversation, within
  ``NEIGHBOUR_SPAN`` of event time), so a candidate's window (ranking.WINDOW) is complete and a short reply
  next to a matching question can be found, as in an exact scope.
Then one round trip scores every candidate (similarity, document length, term frequencies).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, text
from sqlalchemy.sql.elements import TextClause

from strataflow.retrieval import layer_sql
from strataflow.retrieval.layer_sql import Scope
from strataflow.retrieval.ranking import SESSION_GAP, WINDOW

OVERFETCH = 10
MIN_CANDIDATES = 100
TEXT_POOL = 2000
MIN_EF_SEARCH = 100
MAX_EF_SEARCH = 1000  # pgvector's upper bound
NEIGHBOURS = WINDOW
NEIGHBOUR_SPAN = SESSION_GAP * WINDOW


@lru_cache(maxsize=16)
def neighbours_sql(scope: Scope) -> TextClause:
    """The turns next to each given message (same conversation, before and after in event time)."""
    where = layer_sql.filters("messages", scope).replace("m.", "n.")
    side = """(select n.message_id from conversation_messages n
               where n.namespace = c.namespace and n.conversation_id = c.conversation_id
                 and n.event_at {op} c.event_at and n.event_at {bound} and n.message_id <> c.message_id
                 and {where}
               order by n.event_at {order}, n.message_id {order} limit :neighbours)"""
    before = side.format(op="<=", bound=">= c.event_at - :span", order="desc", where=where)
    after = side.format(op=">=", bound="<= c.event_at + :span", order="asc", where=where)
    return text(
        f"""select distinct x.message_id from conversation_messages c
        cross join lateral ({before} union all {after}) x
        where c.namespace = :namespace and c.message_id = any(:ids)"""
    )


def candidate_rows(
    conn: Connection,
    layers: list[str],
    scope: Scope,
    params: dict[str, Any],
    k: int,
) -> dict[str, list[Any]]:
    """Per wide layer, its candidate rows scored (id, grp, event_at, body, meta, sim, doc_len, tf)."""
    ids = {layer: candidate_ids(conn, layer, scope, params, k) for layer in layers}
    if "messages" in ids and ids["messages"]:
        around = conn.execute(
            neighbours_sql(scope),
            {**params, "ids": ids["messages"], "neighbours": NEIGHBOURS, "span": NEIGHBOUR_SPAN},
        )
        ids["messages"] = list(dict.fromkeys([*ids["messages"], *(r.message_id for r in around)]))
    bound = {f"ids_{layer}": found for layer, found in ids.items()}
    rows = conn.execute(layer_sql.scored_rows_sql(tuple(layers), scope), {**params, **bound}).all()
    out: dict[str, list[Any]] = {layer: [] for layer in layers}
    for row in rows:
        out[row.layer].append(row)
    return out


def candidate_ids(conn: Connection, layer: str, scope: Scope, params: dict[str, Any], k: int) -> list[int]:
    """HNSW nearest (exact scan when the filter starved it) united with the full-text best."""
    n = max(OVERFETCH * k, MIN_CANDIDATES)
    conn.execute(layer_sql.SET_EF_SEARCH, {"ef": str(min(max(n, MIN_EF_SEARCH), MAX_EF_SEARCH))})
    vector_ids = [
        r.id for r in conn.execute(layer_sql.vector_ids_sql(layer, scope, False), {**params, "n": n})
    ]
    if len(vector_ids) < n:
        sql = layer_sql.vector_ids_sql(layer, scope, True)
        vector_ids = [r.id for r in conn.execute(sql, {**params, "n": n})]
    text_ids = []
    for every_word in (True, False):  # rows with all the words first, then the best of a sample of any word
        sql = layer_sql.text_ids_sql(layer, scope, every_word)
        text_ids += [r.id for r in conn.execute(sql, {**params, "n": n, "pool": TEXT_POOL})]
    return list(dict.fromkeys([*vector_ids, *text_ids]))
