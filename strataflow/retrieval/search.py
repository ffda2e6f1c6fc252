"""Hybrid retrieval over L1 messages, L2 items, L3 weekly reports and asset chunks.

One search = per layer, the rows in scope (namespace, subject, event-time range) with their cosine similarity
to the query embedding (pgvector ``<=>``) and their term frequencies for the query's full-text lexemes (the
``fts`` columns; English stemming plus jieba-segmented Chinese, OR query);
`strataflow.retrieval.ranking` turns those into one fused score (windowed BM25 + dense, min-max, convex). Hits
of all layers are returned best first.

Filtered vector search and pgvector 0.6 (no iterative index scans): an HNSW scan returns its ef_search
nearest rows and *then* applies the WHERE clause, so a narrow filter can leave fewer than k rows. So:

- exact, when the scope holds at most ``EXACT_LIMIT`` rows (the usual case: one subject, one conversation):
  every row in scope is scored, found through the scope indexes; HNSW is not used at all;
- approximate, for wider scopes: HNSW with ``hnsw.ef_search`` raised and an over-fetch of
  ``OVERFETCH`` x k rows, united with the best full-text matches (GIN; rows with every query word first,
  each pass ranking at most ``TEXT_POOL`` matches so a common word costs little); when the filtered HNSW
  scan returns fewer rows than it asked for, the vector candidates come from an exact scan of the scope.

Latency: the query is embedded on a worker thread (one torch thread) while the scope's rows are read; the
similarities of those rows follow in a second round trip.

Which text counts: a message's ``fts`` plus, when its metadata has them, the speaker's name and an image
caption (``metadata.speaker``, ``metadata.blip_caption``: LoCoMo and chat exports carry them); an item's
statement; a report's summary; a chunk's content. Asset chunks have no subject or event time: the subject
and time filters do not apply to them (a namespace's documents are shared by its subjects).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from functools import lru_cache
from typing import Any

import numpy as np
from pydantic import BaseModel, Field
from sqlalchemy import Connection, text
from sqlalchemy.sql.elements import TextClause

from strataflow.config import Settings
from strataflow.retrieval.ranking import Candidate, rank
from strataflow.textsearch import TSQUERY_SQL, or_query_parts

LAYERS = ("messages", "items", "reports", "assets")
EXACT_LIMIT = 3000  # scopes up to this many rows are scored exactly (no HNSW)
OVERFETCH = 10  # approximate mode: vector and full-text candidates per layer = OVERFETCH * k (at least 100)
TEXT_POOL = 2000  # approximate mode: full-text matches ranked per pass (bounds common words in wide scopes)
MIN_EF_SEARCH = 100
MAX_EF_SEARCH = 1000  # pgvector's upper bound


class Hit(BaseModel):
    """One retrieved row: its layer, id, text, fused score (0..1), event time and provenance."""

    layer: str = Field(description="messages, items, reports or assets")
    id: int = Field(description="message_id, item_id, report_id or chunk_id")
    text: str
    score: float
    event_at: datetime | None = None
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="provenance: table, ids, scope, scores"
    )


# Per layer: the SQL fragments of one row. Identifiers only; every value is a bound parameter.
_SPEAKER_DOC = (
    "case when m.metadata ?| array['speaker', 'blip_caption'] then to_tsvector('english', "
    "coalesce(m.metadata->>'speaker', '') || ' ' || coalesce(m.metadata->>'blip_caption', '')) "
    "else ''::tsvector end"
)
_LAYER_SQL: dict[str, dict[str, str | None]] = {
    "messages": {
        "from": "conversation_messages m",
        "id": "m.message_id",
        "group": "m.conversation_id",
        "time": "m.event_at",
        "subject": "m.subject_id",
        "text": "m.content",
        "embedding": "m.embedding",
        "fts": "m.fts",
        "doc": f"coalesce(m.fts, ''::tsvector) || {_SPEAKER_DOC}",
        "extra_filter": None,
        "meta": "jsonb_build_object('table', 'conversation_messages', 'message_id', m.message_id, "
        "'namespace', m.namespace, 'subject_id', m.subject_id, 'conversation_id', m.conversation_id, "
        "'source', m.source, 'source_message_id', m.source_message_id, 'role', m.role, "
        "'speaker', m.metadata->>'speaker', 'source_message_ids', jsonb_build_array(m.message_id))",
    },
    "items": {
        "from": "memory_items i",
        "id": "i.item_id",
        "group": "''::text",
        "time": "i.valid_from",
        "subject": "i.subject_id",
        "text": "coalesce(i.statement, i.key || ': ' || coalesce(i.value::text, ''))",
        "embedding": "i.embedding",
        "fts": "i.fts",
        "doc": "coalesce(i.fts, ''::tsvector)",
        "extra_filter": "i.status = 'active'",
        "meta": "jsonb_build_object('table', 'memory_items', 'item_id', i.item_id, 'namespace', i.namespace, "
        "'subject_id', i.subject_id, 'kind', i.kind, 'key', i.key, 'value', i.value, 'category', i.category, "
        "'importance', i.importance, 'source', i.source, 'version', i.version, "
        "'source_message_ids', to_jsonb(i.source_message_ids))",
    },
    "reports": {
        "from": "weekly_reports r",
        "id": "r.report_id",
        "group": "''::text",
        "time": "r.week_start::timestamptz",
        "subject": "r.subject_id",
        "text": "r.summary",
        "embedding": "r.embedding",
        "fts": "r.fts",
        "doc": "coalesce(r.fts, ''::tsvector)",
        "extra_filter": None,
        "meta": "jsonb_build_object('table', 'weekly_reports', 'report_id', r.report_id, "
        "'namespace', r.namespace, 'subject_id', r.subject_id, 'kind', 'weekly_report', "
        "'week_start', r.week_start, 'week_end', r.week_end, "
        "'source_message_ids', to_jsonb(r.source_message_ids))",
    },
    "assets": {
        "from": "asset_chunks c join asset_documents d on d.document_id = c.document_id",
        "id": "c.chunk_id",
        "group": "c.document_id::text",
        "time": "null::timestamptz",
        "subject": None,
        "text": "c.content",
        "embedding": "c.embedding",
        "fts": "c.fts",
        "doc": "coalesce(c.fts, ''::tsvector)",
        "extra_filter": None,
        "meta": "jsonb_build_object('table', 'asset_chunks', 'chunk_id', c.chunk_id, "
        "'namespace', c.namespace, "
        "'document_id', c.document_id, 'chunk_index', c.chunk_index, 'uri', d.uri, 'title', d.title, "
        "'kind', d.kind)",
    },
}
_NAMESPACE_COLUMN = {
    "messages": "m.namespace",
    "items": "i.namespace",
    "reports": "r.namespace",
    "assets": "c.namespace",
}
_QUERY_CTE = (
    "with ql as (select "
    + TSQUERY_SQL.format(en="cast(:q_en as text)", zh="cast(:q_zh as text)")
    + " as tsq, (to_tsquery('english', cast(:a_en as text)) && to_tsquery('simple', cast(:a_zh as text)))"
    " as tsq_all, tsvector_to_array(to_tsvector('english', cast(:w_en as text)) "
    "|| to_tsvector('simple', cast(:w_zh as text))) as lexemes)"
)
_SIMILARITY = "case when {embedding} is null then null else 1 - ({embedding} <=> :qvec) end"
SET_EF_SEARCH = text("select set_config('hnsw.ef_search', :ef, true)")


def _filters(layer: str, subject: bool, since: bool, until: bool) -> str:
    parts = [f"{_NAMESPACE_COLUMN[layer]} = :namespace"]
    spec = _LAYER_SQL[layer]
    if spec["extra_filter"]:
        parts.append(str(spec["extra_filter"]))
    if subject and spec["subject"]:
        parts.append(f"{spec['subject']} = :subject_id")
    if layer != "assets":
        if since:
            parts.append(f"{spec['time']} >= :since")
        if until:
            parts.append(f"{spec['time']} < :until")
    return " and ".join(parts)


def _rows_select(layer: str, subject: bool, since: bool, until: bool, by_ids: bool) -> str:
    """Rows in scope (or, by_ids, the given ids, with their similarity to :qvec), their document length and
    query-term frequencies."""
    s = _LAYER_SQL[layer]
    where = _filters(layer, subject, since, until) + (f" and {s['id']} = any(:ids)" if by_ids else "")
    return f"""(select '{layer}'::text as layer, {s["id"]} as id, {s["group"]} as grp,
             {s["time"]} as event_at, {s["text"]} as body,
            {s["meta"]} as meta,
            {_SIMILARITY.format(embedding=s["embedding"]) if by_ids else "null::float8"} as sim,
            length(doc.v) as doc_len,
            case when doc.v @@ ql.tsq then (
                select jsonb_object_agg(u.lexeme, coalesce(array_length(u.positions, 1), 1))
                from unnest(doc.v) u where u.lexeme = any(ql.lexemes)) end as tf
        from {s["from"]} cross join ql cross join lateral (select {s["doc"]} as v) doc
        where {where}
        limit :cap)"""


@lru_cache(maxsize=128)
def _score_sql(layer: str, subject: bool, since: bool, until: bool, by_ids: bool) -> TextClause:
    """One layer's rows (see _rows_select)."""
    return text(f"{_QUERY_CTE} {_rows_select(layer, subject, since, until, by_ids)}")


@lru_cache(maxsize=128)
def _similarities_sql(layers: tuple[str, ...]) -> TextClause:
    """Similarity to :qvec of the given rows of each layer (bound as :ids_<layer>), in one round trip."""
    selects = " union all ".join(
        f"(select '{layer}'::text as layer, {s['id']} as id, "
        f"{_SIMILARITY.format(embedding=s['embedding'])} as sim "
        f"from {s['from']} where {s['id']} = any(:ids_{layer}) and {_NAMESPACE_COLUMN[layer]} = :namespace)"
        for layer in layers
        for s in (_LAYER_SQL[layer],)
    )
    return text(selects)


@lru_cache(maxsize=128)
def _scopes_sql(layers: tuple[str, ...], subject: bool, since: bool, until: bool) -> TextClause:
    """Every layer's rows in scope in one round trip, at most :cap per layer."""
    selects = " union all ".join(_rows_select(layer, subject, since, until, False) for layer in layers)
    return text(f"{_QUERY_CTE} {selects}")


@lru_cache(maxsize=128)
def _vector_ids_sql(layer: str, subject: bool, since: bool, until: bool, exact: bool) -> TextClause:
    """The nearest rows in scope: through HNSW, or (exact) by sorting the scope, which HNSW cannot serve."""
    s = _LAYER_SQL[layer]
    distance = f"{s['embedding']} <=> :qvec"
    order = f"({distance}) + 0" if exact else distance  # an expression the HNSW index cannot match
    return text(
        f"select {s['id']} as id from {s['from']} where {_filters(layer, subject, since, until)} "
        f"and {s['embedding']} is not null order by {order} limit :n"
    )


@lru_cache(maxsize=128)
def _text_ids_sql(layer: str, subject: bool, since: bool, until: bool, every_word: bool) -> TextClause:
    """Good full-text matches in scope: at most :pool matches (GIN on fts) of the OR query, or of the AND
    query with every_word, ranked by ts_rank_cd. The pool bounds the cost of common words in a wide scope."""
    s = _LAYER_SQL[layer]
    match = "ql.tsq_all" if every_word else "ql.tsq"
    return text(
        f"{_QUERY_CTE} select m.id from (select {s['id']} as id, {s['fts']} as v "
        f"from {s['from']} cross join ql where {_filters(layer, subject, since, until)} "
        f"and {s['fts']} @@ {match} limit :pool) m cross join ql "
        f"order by ts_rank_cd(m.v, {match}) desc limit :n"
    )


def query_terms(query: str) -> dict[str, str]:
    """Bound parameters for the query's full-text side: OR queries and the plain words (for lexemes)."""
    en_or, zh_or = or_query_parts(query)
    return {
        "q_en": en_or,
        "q_zh": zh_or,
        "a_en": en_or.replace(" | ", " & "),
        "a_zh": zh_or.replace(" | ", " & "),
        "w_en": en_or.replace(" | ", " "),
        "w_zh": zh_or.replace(" | ", " "),
    }


def search(
    conn: Connection,
    settings: Settings,
    namespace: str,
    query: str,
    subject_id: str | None = None,
    layers: Sequence[str] = LAYERS,
    k: int = 10,
    since: datetime | None = None,
    until: datetime | None = None,
    query_embedding: np.ndarray | None = None,
    exact_limit: int = EXACT_LIMIT,
) -> list[Hit]:
    """The k best hits for `query` across `layers`, within namespace, subject and [since, until).

    `query_embedding` skips encoding the query (callers that already have it); `exact_limit` is the largest
    scope scored exactly (see the module docstring; tests lower it to exercise the approximate path).
    """
    unknown = [layer for layer in layers if layer not in LAYERS]
    if unknown:
        raise ValueError(f"unknown retrieval layer(s) {unknown}; choose from {list(LAYERS)}")
    if k < 1 or not query.strip():
        return []
    # The query's embedding is computed while the scope's rows are read (both wait on something else).
    pending = None if query_embedding is not None else _background().submit(embed_query, settings, query)
    params: dict[str, Any] = {
        "namespace": namespace,
        "subject_id": subject_id,
        "since": since,
        "until": until,
        **query_terms(query),
    }
    flags = (subject_id is not None, since is not None, until is not None)
    layers = tuple(dict.fromkeys(layers))
    rows = conn.execute(_scopes_sql(layers, *flags), {**params, "cap": exact_limit + 1}).all()
    params["qvec"] = np.asarray(pending.result() if pending else query_embedding, dtype=np.float32)
    by_layer = {layer: [r for r in rows if r.layer == layer] for layer in layers}
    exact = {layer: len(by_layer[layer]) <= exact_limit for layer in layers}
    similarity = _similarities(conn, [layer for layer in layers if exact[layer]], by_layer, params)
    hits: list[Hit] = []
    for layer in layers:
        layer_rows = by_layer[layer]
        if not exact[layer]:  # a wide scope: score HNSW and full-text candidates instead
            ids = _candidate_ids(conn, layer, params, flags, k)
            layer_rows = conn.execute(
                _score_sql(layer, *flags, True), {**params, "ids": ids, "cap": len(ids)}
            ).all()
            similarity.update({(layer, int(r.id)): r.sim for r in layer_rows})
        # Windows need a turn's neighbours, which only an exact scope is sure to hold.
        windowed = exact[layer] and layer == "messages"
        hits.extend(_ranked_hits(layer, layer_rows, similarity, k, windowed=windowed, exact=exact[layer]))
    hits.sort(key=lambda hit: (-hit.score, hit.layer, hit.id))
    return hits[:k]


def _similarities(
    conn: Connection, layers: list[str], by_layer: dict[str, list[Any]], params: dict[str, Any]
) -> dict[tuple[str, int], float | None]:
    """(layer, id) -> cosine similarity to the query for the rows read in exact mode."""
    layers = [layer for layer in layers if by_layer[layer]]
    if not layers:
        return {}
    ids = {f"ids_{layer}": [int(r.id) for r in by_layer[layer]] for layer in layers}
    found = conn.execute(_similarities_sql(tuple(layers)), {**params, **ids}).all()
    return {(r.layer, int(r.id)): r.sim for r in found}


_BACKGROUND: list[ThreadPoolExecutor] = []


def _background() -> ThreadPoolExecutor:
    """One worker thread for query embeddings (created on first use)."""
    if not _BACKGROUND:
        with _TORCH_THREADS_LOCK:
            if not _BACKGROUND:
                _BACKGROUND.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="query-embedding"))
    return _BACKGROUND[0]


def embed_query(settings: Settings, query: str) -> np.ndarray:
    """The query's embedding from the configured embedder (strataflow.llm.embeddings), on one CPU thread.

    One short text gains nothing from intra-op parallelism, and on a busy machine torch's spinning worker
    threads make a single encode 10-20x slower (at load 10: ~50 ms on one thread, 200-1500 ms on two).
    """
    from strataflow.llm.embeddings import get_embedder

    embedder = get_embedder(settings)
    torch = sys.modules.get("torch")  # loaded by the local model; a litellm embedder never imports it
    if torch is None:
        return embedder.encode([query])[0]
    with _TORCH_THREADS_LOCK:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return embedder.encode([query])[0]
        finally:
            torch.set_num_threads(threads)


_TORCH_THREADS_LOCK = threading.Lock()


def _ranked_hits(
    layer: str,
    rows: Sequence[Any],
    similarity: dict[tuple[str, int], float | None],
    k: int,
    windowed: bool,
    exact: bool,
) -> list[Hit]:
    """The k best rows of one layer as hits (scores from strataflow.retrieval.ranking)."""
    candidates = [
        Candidate(
            id=int(r.id),
            group=str(r.grp),
            event_at=r.event_at,
            similarity=_float_or_none(similarity.get((layer, int(r.id)))),
            doc_len=int(r.doc_len or 0),
            tf=r.tf or {},
            payload={"text": r.body, "meta": r.meta},
        )
        for r in rows
    ]
    lexemes = sorted({lexeme for c in candidates for lexeme in c.tf})  # a lexeme no row has scores 0 anyway
    hits = []
    for c in rank(candidates, lexemes, windowed)[:k]:
        meta = dict(c.payload["meta"] or {})  # type: ignore[call-overload]
        meta.update(layer=layer, bm25=round(c.bm25, 4), dense=round(c.dense, 4), exact=exact)
        text_ = str(c.payload["text"] or "")
        hits.append(Hit(layer=layer, id=c.id, text=text_, score=c.score, event_at=c.event_at, metadata=meta))
    return hits


def _float_or_none(value: float | None) -> float | None:
    return None if value is None else float(value)


def _candidate_ids(
    conn: Connection, layer: str, params: dict[str, Any], flags: tuple[bool, bool, bool], k: int
) -> list[int]:
    """Approximate mode: HNSW nearest (exact scan when the filter starved it) united with full-text best."""
    n = max(OVERFETCH * k, 100)
    conn.execute(SET_EF_SEARCH, {"ef": str(min(max(n, MIN_EF_SEARCH), MAX_EF_SEARCH))})
    vector_ids = [r.id for r in conn.execute(_vector_ids_sql(layer, *flags, False), {**params, "n": n})]
    if len(vector_ids) < n:
        vector_ids = [r.id for r in conn.execute(_vector_ids_sql(layer, *flags, True), {**params, "n": n})]
    text_ids = []
    for every_word in (True, False):  # rows with all the words first, then the best of a sample of any word
        sql = _text_ids_sql(layer, *flags, every_word)
        text_ids += [r.id for r in conn.execute(sql, {**params, "n": n, "pool": TEXT_POOL})]
    return list(dict.fromkeys([*vector_ids, *text_ids]))
