"""Hybrid, layered retrieval over L1 messages, L2 items, L3 weekly reports and asset chunks.

One search = per layer, the rows in scope (namespace, subject, event-time range, agent for items) with their
cosine similarity to the query embedding (pgvector ``<=>``; a statement's less its hubness:
question_centroid.py) and their term frequencies for the query's
full-text lexemes (English stemming plus jieba-segmented Chinese, OR query; see layer_sql.py for the text of
each layer); `strataflow.retrieval.ranking` turns those into one absolute score per row (0..1, a function of
the query and the row alone but for cross_check across languages: strataflow.retrieval.cross_check):
calibrated dense similarity plus bounded boosts for the share of the query's words the row (or its window)
holds, the evidence of what the query says (query_reading.py: a named speaker,
a when question, a period) and, for L1 turns, the lineage of the L2 items and L3 reports that match
(layered.py). Hits of all layers are returned best first. The same ranking serves `strataflow context`, the
memory search and the service; the dialog-recall benchmark measures it (docs/retrieval-quality.md).

Filtered vector search and pgvector 0.6 (no iterative index scans): an HNSW scan returns its ef_search
nearest rows and *then* applies the WHERE clause, so a narrow filter can leave fewer than k rows. So:

- exact, when the scope holds at most ``EXACT_LIMIT`` rows (the usual case: one subject, one conversation):
  every row in scope is scored, found through the scope indexes; HNSW is not used at all;
- approximate, for wider scopes (a whole namespace): strataflow.retrieval.wide picks candidates (HNSW nearest
  with an over-fetch, and the best full-text matches of the query's rarer words), adds the turns around each
  candidate message so windows work as in exact mode, and the lineage of the best items; only those are
  scored.

Latency: the query is embedded on a worker thread (one torch thread) while the scope's rows are read; the
similarities of those rows follow in a second round trip (by the scope's filters), and the metadata of the
rows shown after ranking. Within one subject the query is embedded without the subject's names and
third-person pronouns (query_reading.without_subject); when it names a speaker of the scope, without that
name too (query_reading.without_speakers), embedded once the speakers are known; a caller-supplied
`query_embedding` array is used as it is. The cyclic garbage collector is paused while a search runs
(`collector_paused`): scoring a few thousand rows exactly otherwise set off a full collection of the
process's heap (the model, torch, Prefect: 300-400 ms) about one search in five.
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import numpy as np
from pydantic import BaseModel, Field
from sqlalchemy import Connection

from models.memory_items import Explain
from strataflow.config import Settings
from strataflow.retrieval import cross_check, layer_sql, wide
from strataflow.retrieval.layer_sql import LAYERS, ItemFilter, Scope
from strataflow.retrieval.layered import ITEM_TOP, REPORT_TOP, lineage_lift
from strataflow.retrieval.query_reading import QueryReading, read_query, without_speakers, without_subject
from strataflow.retrieval.question_centroid import question_centroid
from strataflow.retrieval.ranking import Candidate, cross_language, rank, uncalibrated
from strataflow.textsearch import or_query_parts

SCORE_DIGITS = 4  # a hit's score is rounded once, here, so every surface shows the same number
Similarity = tuple[float | None, str | None]  # a row's cosine to the query and the model of its embedding
EXACT_LIMIT = 3000  # scopes up to this many rows are scored exactly (no HNSW)
LINEAGE_LAYERS = ("items", "reports")  # read for the lineage of L1 turns even when not asked for as hits

__all__ = ["EXACT_LIMIT", "LAYERS", "Hit", "embed_query", "query_terms", "search", "start_embedding"]


class Hit(BaseModel):
    """One retrieved row: its layer, id, text, absolute score (0..1), event time and provenance."""

    layer: str = Field(description="messages, items, reports or assets")
    id: int = Field(description="message_id, item_id, report_id or chunk_id")
    text: str
    score: float
    event_at: datetime | None = None
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="provenance: table, ids, scope, scores"
    )
    explain: Explain | None = Field(None, description="why it was recalled (only when asked: explain=true)")


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
    query_embedding: np.ndarray | Future[np.ndarray] | None = None,
    exact_limit: int = EXACT_LIMIT,
    *,
    agent_id: str | None = None,
    lineage: bool = True,
    now: datetime | None = None,
    metadata: bool = True,
    threshold: float | None = None,
    item_filter: ItemFilter | None = None,
    explain: bool = False,
) -> list[Hit]:
    """The k best hits for `query` across `layers`, within namespace, subject and [since, until).

    `query_embedding` skips encoding the query (callers that already have it), or, as a Future from
    `start_embedding`, is the query's embedding on its way (used as the search's own: a query that names a
    speaker of the scope is still embedded without the name); `exact_limit` is the largest scope scored
    exactly (see the module docstring; tests lower it to exercise the approximate path). `agent_id` is the
    viewer of the one agent-visibility rule for items (strataflow.memory.api: items without an agent, shared
    ones and the agent's own; without an agent, no agent's private items; other layers are unaffected);
    `lineage` (default on) lets matching items and reports lift the turns they came from when messages are
    searched; `now` anchors relative times in the query ("last week"), default the clock; `metadata=False`
    leaves the rows' provenance out of the hits (their ids and scores stay) for a caller that reads the rows
    itself, which saves a round trip. `threshold` keeps only hits that score at least that much (the score
    is absolute: strataflow.retrieval.ranking; what a value means is in docs/retrieval.md; a row embedded by
    a model without a calibration is scored as the default model's cosine, which the process logs once and
    each hit's `explain.uncalibrated` says). `item_filter`
    (layer_sql.ItemFilter) is a condition the items must meet besides the scope, in the query that finds them
    (a drop-in's filter: mem0's, the LangGraph store's), so that the k best are the k best of those items,
    not of all the viewer sees; it may also make the private items of agents it names visible. `explain`
    gives every hit its score's logit in parts (models.memory_items.Explain: why it was recalled).
    """
    unknown = [layer for layer in layers if layer not in LAYERS]
    if unknown:
        raise ValueError(f"unknown retrieval layer(s) {unknown}; choose from {list(LAYERS)}")
    if k < 1 or not query.strip():
        return []
    scope = Scope(
        subject_id is not None, since is not None, until is not None,
        item_sql=item_filter.sql if item_filter else "",
        also_visible=bool(item_filter and item_filter.also_visible),
    )  # fmt: skip
    params: dict[str, Any] = {
        "namespace": namespace,
        "subject_id": subject_id,
        "since": since,
        "until": until,
        "agent_id": agent_id,
        "also_visible": sorted(item_filter.also_visible) if item_filter else [],
        **(item_filter.params if item_filter else {}),
        **query_terms(query),
        **_multilingual(settings, query),
    }
    wanted = tuple(dict.fromkeys(layers))
    with collector_paused():  # the search's rows die with _ranked_hits' frame, before the collector resumes
        hits = _ranked_hits(
            conn, settings, query, wanted, k, scope, params, exact_limit, query_embedding, lineage, now,
            metadata, explain,
        )  # fmt: skip
    return hits if threshold is None else [hit for hit in hits if hit.score >= threshold]


def _ranked_hits(
    conn: Connection,
    settings: Settings,
    query: str,
    wanted: tuple[str, ...],
    k: int,
    scope: Scope,
    params: dict[str, Any],
    exact_limit: int,
    query_embedding: np.ndarray | Future[np.ndarray] | None,
    lineage: bool,
    now: datetime | None,
    metadata: bool,
    explain: bool = False,
) -> list[Hit]:
    """The search itself (see `search`)."""
    # The query's embedding is computed while the scope's rows are read (both wait on something else).
    owned = query_embedding is None  # a Future the caller passed may have other readers: never cancelled
    pending: Future[np.ndarray] | None = None
    pending_text = without_subject(query, params["subject_id"])  # what start_embedding embeds
    if isinstance(query_embedding, Future):
        pending, query_embedding = query_embedding, None
    elif query_embedding is None:
        pending = start_embedding(settings, pending_text)
    extra = LINEAGE_LAYERS if lineage and "messages" in wanted else ()
    read = tuple(dict.fromkeys(wanted + extra))
    by_layer, exact = _scope_rows(conn, read, scope, params, exact_limit)
    approximate = [layer for layer in read if not exact[layer]]
    lexemes = list(conn.execute(layer_sql.QUERY_LEXEMES, params).scalar() or [])
    # Wide layers: full-text candidates need no embedding, so they are found while it is computed.
    text_ids = wide.text_candidates(conn, approximate, scope, params, k, lexemes) if approximate else {}
    reading = _reading(query, settings, by_layer, now, params["subject_id"])
    dense = without_speakers(pending_text, reading.speakers) if reading.speakers else pending_text
    params["qvec"] = _query_vector(settings, pending_text, dense, pending, query_embedding, owned)
    wide_multi = bool(approximate) and (
        params["q_multi"] or wide.multilingual_rows(conn, approximate, params["multi_model"])
    )
    params["cjk_model"], params["qvec_cjk"] = _cjk_query(settings, dense, by_layer, wide_multi, params)
    params["qcent"], params["qhub"] = question_centroid(settings, settings.embedding_model)
    params["qcent_cjk"], params["qhub_cjk"] = question_centroid(
        settings, params["cjk_model"] or settings.embedding_model
    )
    similarity = _similarities(conn, [layer for layer in read if exact[layer]], scope, by_layer, params)
    if approximate:  # score the candidates (and, for messages, their neighbours) instead of the scope
        found = wide.candidate_rows(conn, approximate, scope, params, k, text_ids)
        for layer, rows in found.items():
            by_layer[layer] = rows
            similarity.update({(layer, int(r.id)): (r.sim, r.model) for r in rows})
        reading = _reading(query, settings, by_layer, now, params["subject_id"])  # the candidates' speakers
    second = _second_opinions(dense, by_layer, similarity, params["multi_cross"])
    ranked = {
        layer: _rank_layer(layer, by_layer.get(layer, []), similarity, lexemes, reading, {}, second)
        for layer in read
        if layer != "messages"
    }
    if metadata or extra:  # lineage reads the items' and reports' metadata
        _late_meta(conn, ranked, params, max(k, ITEM_TOP, REPORT_TOP))
    if "messages" in wanted:
        lift = lineage_lift(ranked.get("items", []), ranked.get("reports", [])) if extra else {}
        ranked["messages"] = _rank_layer(
            "messages", by_layer["messages"], similarity, lexemes, reading, lift, second
        )
        if metadata:
            _late_meta(conn, {"messages": ranked["messages"]}, params, k)
    hits = [hit for layer in wanted for hit in _as_hits(layer, ranked[layer][:k], exact[layer], explain)]
    hits.sort(key=lambda hit: (-hit.score, hit.layer, hit.id))
    return hits[:k]


def _scope_rows(
    conn: Connection, layers: tuple[str, ...], scope: Scope, params: dict[str, Any], exact_limit: int
) -> tuple[dict[str, list[Any]], dict[str, bool]]:
    """Rows of the layers whose scope is small enough to score exactly, and which layers are exact.

    Without a subject the scope is usually a whole namespace: a cheap probe (strataflow.retrieval.wide)
    says which layers are too wide before any row is read; the others are read, at most exact_limit + 1
    rows each, and a layer that overflows goes the approximate way too. A subject's scope is read unless
    an earlier read of it overflowed (remembered, then probed: wide.wide_layers)."""
    too_wide = wide.wide_layers(conn, layers, scope, params, exact_limit)
    candidates = tuple(layer for layer in layers if layer not in too_wide)
    by_layer: dict[str, list[Any]] = {layer: [] for layer in layers}
    if candidates:
        sql = layer_sql.scopes_sql(candidates, scope)
        for row in layer_sql.scope_rows(conn.execute(sql, {**params, "cap": exact_limit + 1})):
            by_layer[row.layer].append(row)
    exact = {layer: layer in candidates and len(by_layer[layer]) <= exact_limit for layer in layers}
    overflowed = [layer for layer in candidates if not exact[layer]]
    if overflowed:
        wide.remember_wide(overflowed, scope, params, exact_limit)
    return by_layer, exact


def _late_meta(
    conn: Connection, ranked: dict[str, list[Candidate]], params: dict[str, Any], depth: int
) -> None:
    """The metadata of the best `depth` rows of each layer (rows are read and scored without it: a scope by
    layer_sql.scopes_sql, wide candidates by scored_rows_sql): the rows shown and the items and reports
    whose lineage lifts turns. A row deleted since the read keeps an empty one."""
    layers = tuple(layer for layer in ranked if ranked[layer])
    if not layers:
        return
    ids = {f"ids_{layer}": [c.id for c in ranked[layer][:depth]] for layer in layers}
    found = conn.execute(layer_sql.metas_sql(layers), {**params, **ids})
    metas = {(layer, int(row_id)): meta for layer, row_id, meta in found}
    for layer in layers:
        for candidate in ranked[layer][:depth]:
            candidate.payload["meta"] = metas.get((layer, candidate.id)) or {}


def _reading(
    query: str,
    settings: Settings,
    by_layer: dict[str, list[Any]],
    now: datetime | None,
    subject_id: str | None,
) -> QueryReading:
    """What the query says, among the speakers of the messages read so far."""
    speakers = {str(r.speaker) for r in by_layer.get("messages", []) if r.speaker}
    return read_query(query, speakers, settings.tz, now or datetime.now(UTC), subject_id)


def _multilingual(settings: Settings, query: str) -> dict[str, Any]:
    """The parameters of the multilingual space (layer_sql.model_sql, every layer): :multi_model (the model
    every row has a vector under: item_embedding.multi_model), :multi_cross (its name for a comparison across
    languages: ranking.cross_language) and :q_multi (the query is text of that model: CJK)."""
    from strataflow.llm.embeddings import model_for_text
    from strataflow.memory.item_embedding import multi_model

    multi = multi_model(settings)
    return {
        "multi_model": multi,
        "multi_cross": cross_language(multi) if multi else None,
        "q_multi": bool(multi) and model_for_text(settings, query) == multi,
        "cjk_cross": None,
    }


def _cjk_query(
    settings: Settings, query: str, by_layer: dict[str, list[Any]], wide_multi: bool, params: dict[str, Any]
) -> tuple[str | None, np.ndarray]:
    """(:cjk_model, :qvec_cjk): rows embedded by the CJK model (model_for_text) are compared with the query's
    vector under that model, as are rows compared across languages (their model :multi_cross, set as
    :cjk_cross here). Encoded only when such rows are in the exact scope, or when a wide scope wants it
    (`wide_multi`: the query itself is CJK text, or a wide layer holds rows under that model,
    wide.multilingual_rows; its nearest rows there are candidates, wide.multilingual_ids). An English query
    over a wide English namespace encodes one vector, as before."""
    from strataflow.llm.embeddings import query_embeddings

    cjk = settings.embed_cjk_model or None
    if cjk is None or cjk == settings.embedding_model:
        return None, params["qvec"]
    models = {cjk, params.get("multi_cross")}
    in_scope = any(getattr(row, "model", None) in models for rows in by_layer.values() for row in rows)
    if not in_scope and not wide_multi:
        return None, params["qvec"]
    params["cjk_cross"] = params.get("multi_cross")
    return cjk, np.asarray(query_embeddings(settings, query, models=[cjk])[cjk], dtype=np.float32)


def _query_vector(
    settings: Settings,
    pending_text: str,
    dense: str,
    pending: Future[np.ndarray] | None,
    given: np.ndarray | None,
    owned: bool,
) -> np.ndarray:
    """The query's embedding, of its `dense` text (without the subject's names and pronouns and the speakers
    it names). The pending embedding (of `pending_text`, the query without the subject: start_embedding) is
    used unless the query named speakers, when `dense` is embedded instead (and the pending one cancelled if
    the search started it itself)."""
    if given is not None:
        return np.asarray(given, dtype=np.float32)
    assert pending is not None
    if dense != pending_text:
        if owned:
            pending.cancel()
        return np.asarray(embed_query(settings, dense), dtype=np.float32)
    return np.asarray(pending.result(), dtype=np.float32)


def _similarities(
    conn: Connection, layers: list[str], scope: Scope, by_layer: dict[str, list[Any]], params: dict[str, Any]
) -> dict[tuple[str, int], Similarity]:
    """(layer, id) -> cosine similarity to the query for the rows read in exact mode (the whole scope of
    those layers; a row written since the read has a similarity but no candidate, and is not ranked)."""
    layers = [layer for layer in layers if by_layer[layer]]
    if not layers:
        return {}
    found = conn.execute(layer_sql.similarities_sql(tuple(layers), scope), params).all()
    return {(layer, int(row_id)): (sim, model) for layer, row_id, sim, model in found}


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector paused for one search (reference counting still frees everything).

    A search allocates tens of thousands of short-lived containers when it scores a scope exactly (rows,
    metadata, term frequencies, candidates: about 30 per row). Those alive at a young collection are
    promoted, and every few searches the promotions trigger a full collection, which walks every object of
    a process that has loaded the embedding model, torch and Prefect (about 500k): 300-400 ms, about one
    search in five on a scope of 2,000 rows (bench.context, wide p95). Paused, the search's objects die
    young by reference counting and promote nothing; cycles made meanwhile are collected after it.
    The collector is enabled again only if it was enabled when the search began (the ingest pipeline
    pauses it too), so overlapping searches leave it as the first one found it.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


_BACKGROUND: list[ThreadPoolExecutor] = []


def _background() -> ThreadPoolExecutor:
    """One worker thread for query embeddings (created on first use)."""
    if not _BACKGROUND:
        with _TORCH_THREADS_LOCK:
            if not _BACKGROUND:
                _BACKGROUND.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="query-embedding"))
    return _BACKGROUND[0]


def start_embedding(settings: Settings, query: str, subject_id: str | None = None) -> Future[np.ndarray]:
    """The query's embedding (embed_query) computed on the search's worker thread, so a caller can read the
    database meanwhile and pass the Future to `search` as its query_embedding. Within one subject the query
    is embedded without the subject's names and pronouns (query_reading.without_subject), as `search`
    embeds it: pass the same subject_id to both."""
    return _background().submit(embed_query, settings, without_subject(query, subject_id))


def embed_query(settings: Settings, query: str) -> np.ndarray:
    """The query's embedding under the configured model, on one CPU thread, through the process's query
    cache (strataflow.llm.embeddings.query_embeddings): an agent that asks the same thing again (a repeated
    context or search call) pays no encode, and a cached vector takes no lock.

    One short text gains nothing from intra-op parallelism, and on a busy machine torch's spinning worker
    threads make a single encode 10-20x slower (at load 10: ~50 ms on one thread, 200-1500 ms on two).
    """
    from strataflow.llm.embeddings import cached_query_embedding, query_embeddings

    model = settings.embedding_model
    cached = cached_query_embedding(model, query)
    if cached is not None:
        return cached
    torch = sys.modules.get("torch")  # loaded by the local model; a litellm embedder never imports it
    if torch is None:
        return query_embeddings(settings, query, models=[model])[model]
    with _TORCH_THREADS_LOCK:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            return query_embeddings(settings, query, models=[model])[model]
        finally:
            torch.set_num_threads(threads)


_TORCH_THREADS_LOCK = threading.Lock()


def _second_opinions(
    query: str,
    by_layer: dict[str, list[Any]],
    similarity: dict[tuple[str, int], Similarity],
    cross_model: str | None,
) -> dict[tuple[str, int], float]:
    """The second model's cosines (strataflow.retrieval.cross_check) of the rows compared with the query
    across languages (their similarity's model is `cross_model`, :multi_cross), by the query's dense text."""
    if not cross_model:
        return {}
    cross = {
        key: value for key, (value, model) in similarity.items() if model == cross_model and value is not None
    }
    if not cross:  # the usual case, a question in the rows' language: one pass over the similarities
        return {}
    rows = [
        (layer, int(r.id), float(cross[(layer, int(r.id))]), str(r.body or ""))
        for layer, found in by_layer.items()
        for r in found
        if (layer, int(r.id)) in cross
    ]
    return cross_check.second_opinions(query, rows)


def _rank_layer(
    layer: str,
    rows: Sequence[Any],
    similarity: dict[tuple[str, int], Similarity],
    lexemes: Sequence[str],
    reading: QueryReading,
    lift: dict[int, float],
    second: dict[tuple[str, int], float],
) -> list[Candidate]:
    """One layer's rows as candidates, ranked (strataflow.retrieval.ranking); messages are windowed."""
    candidates = []
    for r in rows:
        meta = r.meta or {}
        value, model = similarity.get((layer, int(r.id)), (None, None))
        candidates.append(
            Candidate(
                id=int(r.id),
                group=str(r.grp),
                event_at=r.event_at,
                similarity=None if value is None else float(value),
                doc_len=int(r.doc_len or 0),
                tf=r.tf or {},
                payload={"meta": meta},
                speaker=r.speaker,
                text=str(r.body or ""),
                lift=lift.get(int(r.id), 0.0),
                model=model,
                second=second.get((layer, int(r.id))),
            )
        )
    ranked = rank(candidates, lexemes, windowed=layer == "messages", reading=reading)
    # A row the query reaches by no measure (no word in it or its window, no embedding yet, no lineage) is
    # not a hit, however few rows the scope has.
    return [c for c in ranked if c.coverage > 0 or c.similarity is not None or c.lift > 0]


def _as_hits(layer: str, ranked: Sequence[Candidate], exact: bool, explain: bool = False) -> list[Hit]:
    """Hits in the layer's ranked order (by score), with the score's parts as metadata."""
    hits = []
    for c in ranked:
        meta = dict(c.payload.get("meta") or {})  # type: ignore[call-overload]
        meta.update(layer=layer, coverage=round(c.coverage, 4), dense=round(c.dense, 4), exact=exact)
        if c.lift:
            meta["lineage_lift"] = round(c.lift, 4)
        score = round(c.score, SCORE_DIGITS)
        why = Explain.of(c.parts, uncalibrated(c.model)) if explain else None
        hits.append(
            Hit(
                layer=layer,
                id=c.id,
                text=c.text,
                score=score,
                event_at=c.event_at,
                metadata=meta,
                explain=why,
            )
        )
    return hits
