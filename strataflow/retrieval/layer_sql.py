"""The SQL of one search, per layer (messages, items, reports, assets): the fragments of one row and the
statements built from them. Identifiers only in the fragments; every value is a bound parameter.

A statement depends on the layer and on which filters are set, given as `Scope` flags (subject, since,
until): the builders are cached per combination.

Which text counts: a message's ``fts`` plus, when its metadata has them, the speaker's name and the caption
or alt text of an attachment (``metadata.speaker``, ``metadata.caption``: documented fields of the canonical
record, docs/ingest.md); an item's ``fts`` (key, statement, value; the statement and key when a row was
written without one) plus its seed 003 name and description; a report's summary and key events; a chunk's
content. Asset chunks have no subject or event time: the subject and time filters do not apply to
them (a namespace's documents are shared by its subjects). The agent filter applies to items only: an agent
sees items without an agent, its own and shared ones: the one rule (strataflow.memory.api.visible_to_agent),
applied to every search of items (without an agent: no agent's private items).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any, NamedTuple

from sqlalchemy import CursorResult, text
from sqlalchemy.sql.elements import TextClause

from strataflow.memory.api import visible_to_agent
from strataflow.textsearch import TSQUERY_SQL

LAYERS = ("messages", "items", "reports", "assets")


class ScopeRow(NamedTuple):
    """One row of `rows_select`, in its column order. Rows are kept as these, not as SQLAlchemy rows, whose
    attribute access costs about 0.6 us: ranking 2,000 rows read a dozen attributes of each (14 ms)."""

    layer: str
    id: int
    grp: str
    event_at: datetime | None
    body: str | None
    meta: dict[str, Any] | None
    speaker: str | None
    sim: float | None
    model: str | None
    doc_len: int | None
    tf: dict[str, int] | None


def scope_rows(result: CursorResult[Any]) -> Iterable[ScopeRow]:
    """The rows of a `rows_select` statement as ScopeRow (its columns checked once, by name)."""
    if tuple(result.keys()) != ScopeRow._fields:
        raise RuntimeError(
            f"a scope statement returned columns {list(result.keys())}, not {ScopeRow._fields}"
        )
    return (ScopeRow._make(values) for values in result)


class Scope(NamedTuple):
    """Which filters a search sets (the values are bound parameters)."""

    subject: bool = False
    since: bool = False
    until: bool = False
    item_sql: str = ""  # items only: ItemFilter.sql, a condition over `i` (its values bound, named f_...)
    also_visible: bool = False  # items only: the private items of the agents :also_visible are visible too


@dataclass(frozen=True)
class ItemFilter:
    """A condition a search's items must meet besides the scope (e.g. a drop-in's filter compiled to SQL by
    strataflow.adapters): `sql` over memory_items aliased `i`, every value a bound parameter of `params`
    named f_...; `also_visible`: agents whose private items the request may see besides its viewer's (a
    caller that may act as them), so one search serves a filter that names several agents."""

    sql: str = "true"
    params: Mapping[str, Any] = field(default_factory=dict)
    also_visible: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if any(not name.startswith("f_") for name in self.params):
            raise ValueError(f"an ItemFilter's parameters are named f_...: {sorted(self.params)}")


_SPEAKER_DOC = (
    "case when m.metadata ?| array['speaker', 'caption'] then to_tsvector('english', "
    "coalesce(m.metadata->>'speaker', '') || ' ' || coalesce(m.metadata->>'caption', '')) "
    "else ''::tsvector end"
)
_ENTRY_DOC = (
    "case when i.name is not null or i.description is not null then to_tsvector('english', "
    "coalesce(i.name, '') || ' ' || coalesce(i.description, '')) || to_tsvector('simple', "
    "coalesce(i.name, '') || ' ' || coalesce(i.description, '')) else ''::tsvector end"
)
# A report's messages: the ids of its key events (layered.py lifts them).
_REPORT_EVENT_IDS = (
    "(select coalesce(jsonb_agg(distinct x), '[]'::jsonb) from jsonb_array_elements(r.key_events) e "
    "cross join lateral jsonb_array_elements(case when jsonb_typeof(e->'message_ids') = 'array' "
    "then e->'message_ids' else '[]'::jsonb end) x)"
)
# One multilingual space for every layer (items: sql/400; turns, reports, chunks: sql/401): a question and a
# row in different languages (a CJK question, :q_multi, and a non-CJK row; or the reverse) are compared under
# the multilingual model (:multi_model), a non-CJK row through its embedding_multi, and scored under that
# model's cross-language calibration: their model reads :multi_cross (ranking.cross_language). A row whose
# multilingual vector is still pending (`strataflow embed` fills it) is compared in its own space.


def multi_sql(alias: str) -> str:
    """Whether a row of `alias` is compared with the query through its embedding_multi."""
    return (
        f"cast(:q_multi as boolean) and {alias}.embedding_multi is not null "
        f"and {alias}.embedding_multi_model = cast(:multi_model as text)"
    )


def model_sql(alias: str) -> str:
    """The model a row of `alias` is compared under: :multi_cross across languages, else its own."""
    return (
        f"(case when {multi_sql(alias)} then cast(:multi_cross as text) when not cast(:q_multi as boolean) "
        f"and {alias}.embedding_model = cast(:multi_model as text) then cast(:multi_cross as text) "
        f"else {alias}.embedding_model end)"
    )


def embedding_sql(alias: str) -> str:
    """The vector a row of `alias` is compared with (see model_sql)."""
    return f"(case when {multi_sql(alias)} then {alias}.embedding_multi else {alias}.embedding end)"


LAYER_SQL: dict[str, dict[str, str | None]] = {
    "messages": {
        "from": "conversation_messages m",
        "id": "m.message_id",
        "group": "m.conversation_id",
        "time": "m.event_at",
        "subject": "m.subject_id",
        "text": "m.content",
        "embedding": "m.embedding",
        "model": model_sql("m"),
        "fts": "m.fts",
        "doc": f"coalesce(m.fts, ''::tsvector) || {_SPEAKER_DOC}",
        "extra_filter": None,
        "speaker": "m.metadata->>'speaker'",
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
        "model": model_sql("i"),
        "fts": "i.fts",
        "doc": "coalesce(i.fts, to_tsvector('english', coalesce(i.statement, '') || ' ' || "
        f"replace(i.key, '_', ' '))) || {_ENTRY_DOC}",
        "extra_filter": "i.status = 'active' and (i.expires_at is null or i.expires_at > now())",
        "speaker": "null::text",
        "meta": "jsonb_build_object('table', 'memory_items', 'item_id', i.item_id, 'namespace', i.namespace, "
        "'subject_id', i.subject_id, 'kind', i.kind, 'key', i.key, 'value', i.value, 'category', i.category, "
        "'importance', i.importance, 'source', i.source, 'version', i.version, 'name', i.name, "
        "'description', i.description, 'entry_type', i.entry_type, 'agent_id', i.agent_id, "
        "'is_shared', i.is_shared, 'source_message_ids', to_jsonb(i.source_message_ids))",
    },
    "reports": {
        "from": "weekly_reports r",
        "id": "r.report_id",
        "group": "''::text",
        "time": "r.week_start::timestamptz",
        "subject": "r.subject_id",
        "text": "r.summary",
        "embedding": "r.embedding",
        "model": model_sql("r"),
        "fts": "r.fts",
        "doc": "coalesce(r.fts, ''::tsvector)",
        "extra_filter": None,
        "speaker": "null::text",
        "meta": "jsonb_build_object('table', 'weekly_reports', 'report_id', r.report_id, "
        "'namespace', r.namespace, 'subject_id', r.subject_id, 'kind', 'weekly_report', "
        "'week_start', r.week_start, 'week_end', r.week_end, "
        f"'event_message_ids', {_REPORT_EVENT_IDS}, "
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
        "model": model_sql("c"),
        "fts": "c.fts",
        "doc": "coalesce(c.fts, ''::tsvector)",
        "extra_filter": None,
        "speaker": "null::text",
        "meta": "jsonb_build_object('table', 'asset_chunks', 'chunk_id', c.chunk_id, "
        "'namespace', c.namespace, "
        "'document_id', c.document_id, 'chunk_index', c.chunk_index, 'uri', d.uri, 'title', d.title, "
        "'kind', d.kind)",
    },
}
NAMESPACE_COLUMN = {
    "messages": "m.namespace",
    "items": "i.namespace",
    "reports": "r.namespace",
    "assets": "c.namespace",
}
QUERY_CTE = (
    "with ql as (select "
    + TSQUERY_SQL.format(en="cast(:q_en as text)", zh="cast(:q_zh as text)")
    + " as tsq, (to_tsquery('english', cast(:a_en as text)) && to_tsquery('simple', cast(:a_zh as text)))"
    " as tsq_all, tsvector_to_array(to_tsvector('english', cast(:w_en as text)) "
    "|| to_tsvector('simple', cast(:w_zh as text))) as lexemes)"
)
# The query's own lexemes (English stems, Chinese words): what a row's coverage is counted against.
QUERY_LEXEMES = text(f"{QUERY_CTE} select lexemes from ql")
# Each row is compared with the query's vector of the row's own model: :qvec_cjk for rows of :cjk_model (the
# CJK embedder, when one is configured) or of :cjk_cross (an item compared across languages, under the same
# model), :qvec for the others. A statement (every layer but the turns) has its
# hubness taken off, its inner product with the model's question centroid (:qcent, :qcent_cjk; a zero vector
# for a model that is not centred), less a typical statement's (:qhub, :qhub_cjk):
# strataflow.retrieval.question_centroid.
_SIMILARITY = (
    "case when {embedding} is null then null when {model} = cast(:cjk_model as text) "
    "or {model} = cast(:cjk_cross as text) "
    "then 1 - ({embedding} <=> :qvec_cjk){hub_cjk} else 1 - ({embedding} <=> :qvec){hub} end"
)


def table_alias(layer: str) -> str:
    """The alias `layer`'s table has in its FROM (m, i, r, c)."""
    return str(LAYER_SQL[layer]["id"]).split(".")[0]


def similarity_sql(layer: str) -> str:
    """A row of `layer`'s similarity to the query (see _SIMILARITY); `<#>` is the negated inner product."""
    s = LAYER_SQL[layer]
    compared, model = embedding_sql(table_alias(layer)), str(s["model"])
    if layer == "messages":
        return _SIMILARITY.format(embedding=compared, model=model, hub="", hub_cjk="")
    own = _statement_similarity(compared, model)
    if layer != "items":
        return own
    # An item with one vector per indexed text (memory_items.path_embeddings, all under its model): the best.
    best = _statement_similarity("p.v", model)
    return (
        f"case when i.path_embeddings is null or ({multi_sql('i')}) then {own} "
        f"else (select max({best}) from unnest(i.path_embeddings) as p(v)) end"
    )


def _statement_similarity(embedding: str, model: str) -> str:
    hub = f" + ({embedding} <#> :qcent) + :qhub"
    hub_cjk = f" + ({embedding} <#> :qcent_cjk) + :qhub_cjk"
    return _SIMILARITY.format(embedding=embedding, model=model, hub=hub, hub_cjk=hub_cjk)


SET_EF_SEARCH = text("select set_config('hnsw.ef_search', :ef, true)")
AGENT_FILTER = visible_to_agent("i")


def filters(layer: str, scope: Scope) -> str:
    """The WHERE clause of a layer's rows in scope."""
    spec = LAYER_SQL[layer]
    parts = [f"{NAMESPACE_COLUMN[layer]} = :namespace"]
    if spec["extra_filter"]:
        parts.append(str(spec["extra_filter"]))
    if scope.subject and spec["subject"]:
        parts.append(f"{spec['subject']} = :subject_id")
    if layer != "assets":
        if scope.since:
            parts.append(f"{spec['time']} >= :since")
        if scope.until:
            parts.append(f"{spec['time']} < :until")
    if layer == "items":
        also = " or i.agent_id = any(cast(:also_visible as text[]))" if scope.also_visible else ""
        parts.append(f"({AGENT_FILTER}{also})" if also else AGENT_FILTER)
        if scope.item_sql:
            parts.append(f"({scope.item_sql})")
    return " and ".join(parts)


def rows_select(layer: str, scope: Scope, by_ids: bool, cap: str = ":cap", meta: bool = True) -> str:
    """Rows in scope (or, by_ids, the given ids, with their similarity to :qvec), their speaker, document
    length and query-term frequencies; without `meta`, a null in its place (read later: `metas_sql`).

    The frequencies come from the document reduced to the query's lexemes first (ts_delete of every other
    lexeme, positions kept): unnesting a whole report or item to keep three of its lexemes was most of the
    time of reading a scope of a few thousand rows."""
    s = LAYER_SQL[layer]
    where = filters(layer, scope) + (f" and {s['id']} = any(:ids_{layer})" if by_ids else "")
    sim = similarity_sql(layer) if by_ids else "null::float8"
    return f"""(select '{layer}'::text as layer, {s["id"]} as id, {s["group"]} as grp,
             {s["time"]} as event_at, {s["text"]} as body,
            {s["meta"] if meta else "null::jsonb"} as meta, {s["speaker"]} as speaker,
            {sim} as sim,
            {s["model"]} as model,
            length(doc.v) as doc_len,
            case when doc.v @@ ql.tsq then (
                select jsonb_object_agg(u.lexeme, coalesce(array_length(u.positions, 1), 1))
                from unnest(ts_delete(doc.v, tsvector_to_array(ts_delete(doc.v, ql.lexemes)))) u
                where u.lexeme = any(ql.lexemes)) end as tf
        from {s["from"]} cross join ql cross join lateral (select {s["doc"]} as v) doc
        where {where}
        limit {cap})"""


@lru_cache(maxsize=256)
def scored_rows_sql(layers: tuple[str, ...], scope: Scope) -> TextClause:
    """The given rows of each layer (bound as :ids_<layer>) with similarity, length and term frequencies;
    their metadata is read after ranking for the rows that need it (`metas_sql`), as for a scope."""
    selects = " union all ".join(rows_select(layer, scope, True, cap="all", meta=False) for layer in layers)
    return text(f"{QUERY_CTE} {selects}")


@lru_cache(maxsize=256)
def similarities_sql(layers: tuple[str, ...], scope: Scope) -> TextClause:
    """Similarity to :qvec of every row in scope of each layer, in one round trip. Called for the layers
    whose whole scope was just read (exact mode): the same rows, found by the scope's filters rather than
    by a list of their ids (with thousands of ids, each weekly partition's primary key was probed for every
    id: 3x the time of reading the scope again)."""
    selects = " union all ".join(
        f"(select '{layer}'::text as layer, {s['id']} as id, "
        f"{similarity_sql(layer)} as sim, {s['model']} as model "
        f"from {s['from']} where {filters(layer, scope)})"
        for layer in layers
        for s in (LAYER_SQL[layer],)
    )
    return text(selects)


@lru_cache(maxsize=256)
def scopes_sql(layers: tuple[str, ...], scope: Scope) -> TextClause:
    """Every layer's rows in scope in one round trip, at most :cap per layer, without their metadata: ranking
    reads none of it but a message's speaker, a column of its own here. The metadata, the dearest column
    to build and to decode, is read after ranking for the rows shown and those that lift turns
    (`metas_sql`)."""
    selects = " union all ".join(rows_select(layer, scope, False, meta=False) for layer in layers)
    return text(f"{QUERY_CTE} {selects}")


@lru_cache(maxsize=64)
def metas_sql(layers: tuple[str, ...]) -> TextClause:
    """The metadata of the given rows of each layer (bound as :ids_<layer>), in one round trip."""
    selects = " union all ".join(
        f"(select '{layer}'::text as layer, {s['id']} as id, {s['meta']} as meta "
        f"from {s['from']} where {s['id']} = any(:ids_{layer}) and {NAMESPACE_COLUMN[layer]} = :namespace)"
        for layer in layers
        for s in (LAYER_SQL[layer],)
    )
    return text(selects)


@lru_cache(maxsize=256)
def vector_ids_sql(layer: str, scope: Scope, exact: bool) -> TextClause:
    """The nearest rows in scope: through HNSW, or (exact) by sorting the scope, which HNSW cannot serve."""
    s = LAYER_SQL[layer]
    distance = f"{s['embedding']} <=> :qvec"
    order = f"({distance}) + 0" if exact else distance  # an expression the HNSW index cannot match
    return text(
        f"select {s['id']} as id from {s['from']} where {filters(layer, scope)} "
        f"and {s['embedding']} is not null order by {order} limit :n"
    )


@lru_cache(maxsize=256)
def multi_ids_sql(layer: str, scope: Scope, own: bool) -> TextClause:
    """The nearest rows in scope to the query's multilingual vector (:qvec_cjk), through HNSW only: the index
    on embedding_multi (rows whose text another model embeds, compared across languages), or, `own`, the one
    on embedding for the rows whose own vector is under the multilingual model (:multi_model)."""
    s, alias = LAYER_SQL[layer], table_alias(layer)
    column = f"{alias}.embedding" if own else f"{alias}.embedding_multi"
    model = f"{alias}.embedding_model" if own else f"{alias}.embedding_multi_model"
    return text(
        f"select {s['id']} as id from {s['from']} where {filters(layer, scope)} "
        f"and {column} is not null and {model} = cast(:multi_model as text) "
        f"order by {column} <=> :qvec_cjk limit :n"
    )
