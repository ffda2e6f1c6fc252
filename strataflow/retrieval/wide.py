"""Candidates for a wide scope (more rows than strataflow.retrieval.search scores exactly, e.g. a whole
namespace without a subject): the rows worth scoring, found through the indexes, then scored like an exact
scope's rows. Target: p95 <= 100 ms over 1M L1 rows and 10,000 subjects, query embedding included
(bench/context.py, `wide_*_ms`).

Per layer:
- full text (`text_candidates`, run while the query is being embedded): the rows that hold every one of the
  query's *rare* lexemes (estimated share of rows below ``RARE_SHARE``, from the planner's statistics of the
  `fts` column: `most_common_elems`, kept ``STATS_TTL_S`` seconds); when none does, those that hold every
  rare lexeme the statistics list (two or more: the question's own words, "drink" asked of a memory that
  says "lattes", may be in no row); when none does, those that hold one of them; at most ``TEXT_POOL`` GIN
  matches ranked by ts_rank_cd against the whole query. A word in every tenth row cannot single out a row
  among a million, and its posting list is what makes a full-text pass slow; the coverage still counts it on
  the scored candidates. Rows holding every rare word first: at 1M rows a first and a last name are each in
  ~9,000 rows, both in ~80, and a pool of 2,000 rows holding either was an arbitrary ninth of them (2,000
  heap reads and ranks, mostly for rows of other people);
- dense: the HNSW nearest rows in scope, ``OVERFETCH`` x k (at least ``MIN_CANDIDATES``). L1 is
  partitioned by week and each partition's index returns ``hnsw.ef_search`` rows, so ef_search is twice the
  rows wanted shared out over the partitions (at 5 partitions: 20, about a third of the time of 50); when
  that leaves too few rows, HNSW again with ef_search = the rows wanted, then, when the filter starves the
  scan (pgvector 0.6 filters after the scan), an exact scan of the scope;
- multilingual (one multilingual space, sql/400 and sql/401): when the query has a vector under the
  multilingual model (a CJK query, or any query over a layer that holds rows under that model, by the
  planner's statistics of `embedding_model`: `multilingual_rows`), the HNSW nearest rows to it through the
  index on `embedding_multi` (for a CJK query: rows in the other language) and through the one on
  `embedding` among the rows whose own vector is under that model (CJK rows), ``OVERFETCH`` x k each, with
  ``MULTI_EF_FACTOR`` times the dense pass's ef_search and no exact fallback (a layer not yet backfilled
  yields fewer);
- messages: the turns around the best ``WINDOW_SEEDS`` candidates of each source (``NEIGHBOURS`` on each
  side, same conversation, within ``NEIGHBOUR_SPAN`` of event time), so their windows (ranking.WINDOW) are
  complete and a short reply next to a matching question is found, as in an exact scope.
Then one round trip scores every candidate (similarity, document length, term frequencies).

Whether a scope is wide is probed (an index-only `offset` on message_keys or the layer's table) and kept
``PROBE_TTL_S`` seconds per process: a stale "small" answer costs one capped read (search falls back to this
path when the read overflows), a stale "wide" one only means approximate scoring of a small scope.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, text
from sqlalchemy.sql.elements import TextClause

from strataflow.retrieval import layer_sql
from strataflow.retrieval.layer_sql import LAYER_SQL, QUERY_CTE, Scope, filters
from strataflow.retrieval.ranking import SESSION_GAP, WINDOW

OVERFETCH = 5
MIN_CANDIDATES = 50
TEXT_POOL = 2000
RARE_SHARE = 0.02  # a lexeme in more than this share of a layer's rows is not used to find candidates
STATS_TTL_S = 600.0
PROBE_TTL_S = 60.0
MAX_PROBES = 10_000
MIN_EF_SEARCH = 20
MAX_EF_SEARCH = 1000  # pgvector's upper bound
NEIGHBOURS = WINDOW
NEIGHBOUR_SPAN = SESSION_GAP * WINDOW
WINDOW_SEEDS = 15  # candidates per source whose neighbours are fetched
# The multilingual pass's ef_search, over the dense pass's: multilingual-e5-small's cosines are compressed
# (a question's 50 nearest of 4,000 English turns all within 0.79-0.81), so HNSW needs a wider beam for the
# same recall: at 5,006 turns in one partition, ef_search 100 missed the exact nearest turn of
# 我姐姐在哪里举行婚礼？ (0.808), 200 found it.
MULTI_EF_FACTOR = 2

TABLES = {
    "messages": "conversation_messages",
    "items": "memory_items",
    "reports": "weekly_reports",
    "assets": "asset_chunks",
}
SELECT_FTS_STATS = text(
    """
    select (most_common_elems::text)::text[] as elems, most_common_elem_freqs as freqs
    from pg_stats
    where schemaname = current_schema() and attname = 'fts'
      and (tablename = :table or tablename like :table || '\\_w%')
    """
)
SELECT_MODEL_STATS = text(
    """
    select (most_common_vals::text)::text[] as vals, n_distinct
    from pg_stats
    where schemaname = current_schema() and attname = 'embedding_model'
      and (tablename = :table or tablename like :table || '\\_w%')
    """
)
COUNT_PARTITIONS = text(
    "select count(*) from pg_inherits where inhparent = cast('conversation_messages' as regclass)"
)
_STATS: dict[str, tuple[float, dict[str, float], float]] = {}
_MODELS: dict[tuple[str, str], tuple[float, bool]] = {}
_PARTITIONS: list[float] = [-1e9, 1.0]
_PROBES: dict[tuple[Any, ...], tuple[float, bool]] = {}


def wide_layers(
    conn: Connection, layers: tuple[str, ...], scope: Scope, params: dict[str, Any], exact_limit: int
) -> set[str]:
    """The layers whose scope holds more than exact_limit rows (probed, then remembered PROBE_TTL_S).

    A subject's scope is usually small, so it is not probed (search reads it, capped) until a read of it
    overflowed (`remember_wide`); from then on it is probed again when that answer is PROBE_TTL_S old, and
    forgotten when the probe finds it small. A subject of 100k items was read to its cap of 3,001 rows with
    their term frequencies before every search went the approximate way: three quarters of its time."""
    now = time.monotonic()
    keys = {layer: probe_key(layer, scope, params, exact_limit) for layer in layers}
    unknown = tuple(
        layer
        for layer in layers
        if (keys[layer] in _PROBES or not scope.subject)
        and now - _PROBES.get(keys[layer], (-1e9, False))[0] > PROBE_TTL_S
    )
    if unknown:
        rows = conn.execute(probe_sql(unknown, scope), {**params, "cap": exact_limit}).all()
        for row in rows:
            if scope.subject and not row.wide:
                _PROBES.pop(keys[row.layer], None)
            else:
                _remember(keys[row.layer], now, bool(row.wide))
    return {layer for layer in layers if _PROBES.get(keys[layer], (0.0, False))[1]}


def remember_wide(layers: Sequence[str], scope: Scope, params: dict[str, Any], exact_limit: int) -> None:
    """The layers' scope found wider than exact_limit by a capped read (search's): not read again for
    PROBE_TTL_S."""
    now = time.monotonic()
    for layer in layers:
        _remember(probe_key(layer, scope, params, exact_limit), now, True)


def probe_key(layer: str, scope: Scope, params: dict[str, Any], exact_limit: int) -> tuple[Any, ...]:
    """What a scope's width depends on: its filters and their values (the viewer's and an item filter's)."""
    filtered = repr(sorted((name, value) for name, value in params.items() if name.startswith("f_")))
    return (
        params["namespace"], params.get("subject_id") if scope.subject else None, layer, scope, exact_limit,
        params.get("since"), params.get("until"), params.get("agent_id"),
        tuple(params.get("also_visible", ())), filtered,
    )  # fmt: skip


def _remember(key: tuple[Any, ...], now: float, is_wide: bool) -> None:
    if len(_PROBES) >= MAX_PROBES and key not in _PROBES:
        _PROBES.clear()  # a process that saw this many scopes starts over (a probe each)
    _PROBES[key] = (now, is_wide)


@lru_cache(maxsize=64)
def probe_sql(layers: tuple[str, ...], scope: Scope) -> TextClause:
    """Per layer, whether the scope holds more than :cap rows. Messages are counted on message_keys (small,
    unpartitioned, indexed by namespace and event time; keys of expired rows count too)."""
    selects = []
    for layer in layers:
        if layer == "messages" and not scope.subject:
            where = "k.namespace = :namespace" + (" and k.event_at >= :since" if scope.since else "")
            where += " and k.event_at < :until" if scope.until else ""
            source = f"message_keys k where {where}"
        else:
            source = f"{LAYER_SQL[layer]['from']} where {filters(layer, scope)}"
        selects.append(
            f"(select '{layer}'::text as layer, exists (select 1 from {source} offset :cap) as wide)"
        )
    return text(" union all ".join(selects))


def text_candidates(
    conn: Connection, layers: list[str], scope: Scope, params: dict[str, Any], k: int, lexemes: Sequence[str]
) -> dict[str, list[int]]:
    """Per layer, the best full-text matches of the query's rare `lexemes` (layer_sql.QUERY_LEXEMES: its
    English stems and Chinese words; see the module docstring)."""
    found: dict[str, list[int]] = {}
    for layer in layers:
        shares, floor = lexeme_shares(conn, TABLES[layer])
        rare = [lexeme for lexeme in lexemes if shares.get(lexeme, floor) < RARE_SHARE]
        if not rare:
            found[layer] = []
            continue
        n = _n(k)
        listed = [lexeme for lexeme in rare if lexeme in shares]
        tries = [" & ".join(_quoted(x) for x in rare)]  # rows holding every rare word first, then
        if len(rare) > len(listed) > 1:  # those holding every rare word the rows are known to hold (a
            tries.append(" & ".join(_quoted(x) for x in listed))  # question's own words may be in none)
        if len(rare) > 1:  # and when no row holds them together, those holding one of them
            tries.append(" | ".join(_quoted(x) for x in rare))
        every: list[int] = []
        for tsquery in tries:
            every = [int(r.id) for r in _text_ids(conn, layer, scope, params, tsquery, n)]
            if every:
                break
        found[layer] = every
    return found


def _text_ids(
    conn: Connection, layer: str, scope: Scope, params: dict[str, Any], tsquery: str, n: int
) -> Any:
    return conn.execute(text_ids_sql(layer, scope), {**params, "rare": tsquery, "n": n, "pool": TEXT_POOL})


def lexeme_shares(conn: Connection, table: str) -> tuple[dict[str, float], float]:
    """lexeme -> share of rows holding it, and the share under which unlisted lexemes lie (0: no stats)."""
    now = time.monotonic()
    cached = _STATS.get(table)
    if cached is None or now - cached[0] > STATS_TTL_S:
        shares: dict[str, float] = {}
        floor = 0.0
        for row in conn.execute(SELECT_FTS_STATS, {"table": table}):
            elems, freqs = row.elems or [], row.freqs or []
            listed = list(zip(elems, freqs, strict=False))
            for lexeme, share in listed:
                shares[lexeme] = max(shares.get(lexeme, 0.0), float(share))
            if listed:
                floor = max(floor, min(float(share) for _, share in listed))
        cached = (now, shares, floor)
        _STATS[table] = cached
    return cached[1], cached[2]


@lru_cache(maxsize=64)
def text_ids_sql(layer: str, scope: Scope) -> TextClause:
    """At most :pool rows matching the rare lexemes (:rare, a tsquery of quoted lexemes) through GIN, the :n
    best of them by ts_rank_cd against the whole OR query."""
    s = LAYER_SQL[layer]
    return text(
        f"{QUERY_CTE} select m.id from (select {s['id']} as id, {s['fts']} as v from {s['from']} "
        f"where {filters(layer, scope)} and {s['fts']} @@ cast(:rare as tsquery) limit :pool) m "
        "cross join ql order by ts_rank_cd(m.v, ql.tsq) desc limit :n"
    )


@lru_cache(maxsize=16)
def neighbours_sql(scope: Scope) -> TextClause:
    """The turns next to each given message (same conversation, before and after in event time)."""
    where = filters("messages", scope).replace("m.", "n.")
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
    text_ids: dict[str, list[int]],
) -> dict[str, list[Any]]:
    """Per wide layer, its candidate rows scored (id, grp, event_at, body, meta, sim, doc_len, tf); params
    hold the query vector by now."""
    ids: dict[str, list[int]] = {}
    for layer in layers:
        vector_ids = nearest_ids(conn, layer, scope, params, k)
        multi_ids = multilingual_ids(conn, layer, scope, params, k)
        found = text_ids.get(layer, [])
        ids[layer] = list(dict.fromkeys([*vector_ids, *multi_ids, *found]))
        if layer == "messages" and ids[layer]:
            seeds = [*vector_ids[:WINDOW_SEEDS], *multi_ids[:WINDOW_SEEDS], *found[:WINDOW_SEEDS]]
            around = conn.execute(
                neighbours_sql(scope),
                {
                    **params,
                    "ids": list(dict.fromkeys(seeds)),
                    "neighbours": NEIGHBOURS,
                    "span": NEIGHBOUR_SPAN,
                },
            )
            ids[layer] = list(dict.fromkeys([*ids[layer], *(int(r.message_id) for r in around)]))
    bound = {f"ids_{layer}": found for layer, found in ids.items()}
    rows = conn.execute(layer_sql.scored_rows_sql(tuple(layers), scope), {**params, **bound})
    out: dict[str, list[Any]] = {layer: [] for layer in layers}
    for row in layer_sql.scope_rows(rows):
        out[row.layer].append(row)
    return out


def nearest_ids(conn: Connection, layer: str, scope: Scope, params: dict[str, Any], k: int) -> list[int]:
    """HNSW nearest rows in scope. L1 is partitioned by week and each partition's index returns ef_search
    rows, so its ef_search is shared out over the partitions (x2); when that leaves too few rows, HNSW again
    with ef_search = n, then an exact scan of the scope (the filter starved the index scans)."""
    n = _n(k)
    for ef in dict.fromkeys([_shared_ef(conn, layer, n), max(MIN_EF_SEARCH, n)]):
        conn.execute(layer_sql.SET_EF_SEARCH, {"ef": str(min(ef, MAX_EF_SEARCH))})
        sql = layer_sql.vector_ids_sql(layer, scope, False)
        found = [int(r.id) for r in conn.execute(sql, {**params, "n": n})]
        if len(found) >= n:
            return found
    sql = layer_sql.vector_ids_sql(layer, scope, True)
    return [int(r.id) for r in conn.execute(sql, {**params, "n": n})]


def multilingual_ids(conn: Connection, layer: str, scope: Scope, params: dict[str, Any], k: int) -> list[int]:
    """HNSW nearest rows in scope to the query's multilingual vector (params' :qvec_cjk, set only when the
    search encoded it): through embedding_multi for a CJK query, and among the rows whose own vector is
    multilingual. No exact fallback: a scan of the whole scope for a layer with few such rows (an English
    namespace, one not yet backfilled) would cost every query what the index saves."""
    if params.get("cjk_model") is None or not params.get("multi_model"):
        return []
    n = _n(k)
    ef = MULTI_EF_FACTOR * _shared_ef(conn, layer, n)
    conn.execute(layer_sql.SET_EF_SEARCH, {"ef": str(min(ef, MAX_EF_SEARCH))})
    found: list[int] = []
    for own in (False, True) if params.get("q_multi") else (True,):
        sql = layer_sql.multi_ids_sql(layer, scope, own)
        found.extend(int(r.id) for r in conn.execute(sql, {**params, "n": n}))
    return list(dict.fromkeys(found))


def multilingual_rows(conn: Connection, layers: Sequence[str], multi: str | None) -> bool:
    """Whether any of the layers' tables may hold rows whose own vector is under the multilingual model
    `multi` (an English query then needs its vector under that model to reach them), by the planner's
    statistics of `embedding_model` (kept STATS_TTL_S seconds): no statistics yet (a new table or
    partition) counts as maybe; a table whose every sampled row is under one other model as none (a rare
    such row may be missed: its words still find it)."""
    if not multi:
        return False
    now = time.monotonic()
    for layer in layers:
        key = (TABLES[layer], multi)
        cached = _MODELS.get(key)
        if cached is None or now - cached[0] > STATS_TTL_S:
            rows = conn.execute(SELECT_MODEL_STATS, {"table": TABLES[layer]}).all()
            maybe = not rows or any(
                multi in (row.vals or []) or (row.n_distinct or 0) not in (0, 1) for row in rows
            )
            cached = (now, maybe)
            _MODELS[key] = cached
        if cached[1]:
            return True
    return False


def _shared_ef(conn: Connection, layer: str, n: int) -> int:
    """ef_search for n rows: L1's n shared out over its weekly partitions (x2), each of which returns
    ef_search rows."""
    shares = max(1, partition_count(conn)) if layer == "messages" else 1
    return max(MIN_EF_SEARCH, -(-2 * n // shares))


def partition_count(conn: Connection) -> int:
    """How many weekly partitions L1 has (kept STATS_TTL_S seconds)."""
    now = time.monotonic()
    if now - _PARTITIONS[0] > STATS_TTL_S:
        _PARTITIONS[:] = [now, int(conn.execute(COUNT_PARTITIONS).scalar_one())]
    return int(_PARTITIONS[1])


def _n(k: int) -> int:
    return max(OVERFETCH * k, MIN_CANDIDATES)


def _quoted(lexeme: str) -> str:
    """A lexeme as a tsquery operand (quoted: no operator inside it is read)."""
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"
