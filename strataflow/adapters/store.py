"""LangGraph's BaseStore operations (get, put, search, list_namespaces) over the one L2 API: what
strataflow.integrations.langgraph's StrataflowStore sends as one batch (POST /v1/store/batch), run in one
transaction by `run_batch`.

An item is an entry of type `user` of the user its namespace names, in the store's agent's scope, named by
store_paths.entry_name; its value is the item's value (JSON) and `metadata.langgraph` keeps the namespace,
key, index and ttl. Its statement is store_paths.statement; an item indexed by several texts (a put's
`index=[...]`) also has one vector per text (memory_items.path_embeddings), and the ranking takes the best
(strataflow.retrieval.layer_sql), as PostgresStore embeds each field path. `index=False`, or an index that
finds no text, embeds nothing: a search with a query lists such items after the ranked ones, score None.

Time to live: `ttl` (minutes) sets memory_items.expires_at = now + ttl; an expired item is gone for every read
at once (in SQL), a read with refresh_ttl restarts the ttl of the live items it returns (a read-only key's
reads restart nothing), and each batch that writes deletes (versioned) up to SWEEP expired items of its agent.

Namespace prefixes, value filters (conditions.json_condition: a value or $eq, $ne, $gt, $gte, $lt, $lte, $in,
$nin on dotted paths) and pages are SQL: a search reads only the page it returns (with a query, the best
offset + limit of the ranking, MAX_RANKED at most: past them, the items the ranking does not hold follow, as
after a short ranking; an offset the schema allows is never refused).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Connection, text

from strataflow.adapters import store_paths
from strataflow.adapters.conditions import Bound, FilterError, json_condition
from strataflow.config import Settings
from strataflow.llm.embeddings import model_for_text
from strataflow.memory import api, item_embedding
from strataflow.memory.item_fields import name_key
from strataflow.retrieval.item_search import MAX_SEARCH, search_memories
from strataflow.retrieval.layer_sql import ItemFilter

ENTRY_TYPE = "user"
FIELD = "langgraph"  # metadata field: {"namespace": [...], "key", "index", "ttl", "embedded"}
SWEEP = 100  # expired items a writing batch deletes
MAX_RANKED = MAX_SEARCH  # offset + limit of a search with a query
STORE_OPERATORS = {f"${op}": op for op in ("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin")}
# SQL over memory_items aliased {a}: an item's namespace (a JSON list of labels), whether it is live, ranked
NAMESPACE = f"({{a}}.metadata #> '{{{{{FIELD},namespace}}}}')"
LIVE = "mi.status = 'active' and (mi.expires_at is null or mi.expires_at > now())"
RANKED = (
    f"coalesce({{a}}.metadata #>> '{{{{{FIELD},embedded}}}}', 'true') = 'true' "
    f"and ({{a}}.metadata #> '{{{{{FIELD},index}}}}') is distinct from 'false'::jsonb"
)
SET_EXPIRY_AND_PATHS = text(
    """
    update memory_items set expires_at = now() + make_interval(secs => cast(:ttl as float8) * 60),
        path_embeddings = cast(cast(:paths as text[]) as vector[])
    where namespace = :namespace and item_id = :item_id
    """
)
REFRESH = text(
    f"""
    update memory_items set expires_at = now()
        + make_interval(secs => cast(metadata #>> '{{{FIELD},ttl}}' as float8) * 60)
    where namespace = :namespace and item_id = any(cast(:item_ids as bigint[])) and status = 'active'
        and expires_at > now() and jsonb_typeof(metadata #> '{{{FIELD},ttl}}') = 'number'
    """
)
SELECT_EXPIRED = text(
    """
    select mi.item_id, mi.subject_id, mi.agent_id, mi.kind, mi.key, mi.valid_from from memory_items as mi
    where mi.namespace = :namespace and mi.status = 'active' and mi.expires_at <= now()
        and mi.agent_id is not distinct from cast(:store_agent as text)
    order by mi.expires_at
    limit :limit
    for update skip locked
    """
)
ITEM_SELECT = "mi.item_id, mi.metadata, mi.value, mi.created_at, mi.updated_at"


@dataclass(frozen=True)
class StoreScope:
    """Whose store: the namespace, the agent whose items it holds (None: the namespace's), where the user
    label is, and whether the request may write (a read-only key's reads restart no ttl)."""

    namespace: str
    agent: str | None
    subject_at: int = 1
    may_write: bool = True


@dataclass(frozen=True)
class Get:
    namespace: tuple[str, ...]
    key: str
    refresh_ttl: bool = True


@dataclass(frozen=True)
class Put:
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any] | None  # None deletes
    index: Literal[False] | list[str] | None = None
    ttl: float | None = None


@dataclass(frozen=True)
class Search:
    prefix: tuple[str, ...]
    query: str | None = None
    filter: dict[str, Any] | None = None
    limit: int = 10
    offset: int = 0
    refresh_ttl: bool = True
    threshold: float | None = None


@dataclass(frozen=True)
class Match:
    kind: Literal["prefix", "suffix"]
    path: tuple[str, ...]  # "*" matches any one label


@dataclass(frozen=True)
class ListNamespaces:
    conditions: tuple[Match, ...] = ()
    max_depth: int | None = None
    limit: int = 100
    offset: int = 0


Op = Get | Put | Search | ListNamespaces


@dataclass(frozen=True)
class Item:
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    score: float | None = None


@dataclass(frozen=True)
class _Row:
    """An item read, with its id and whether it has a time to live."""

    item_id: int
    item: Item
    timed: bool


def run_batch(conn: Connection, settings: Settings, scope: StoreScope, ops: Sequence[Op]) -> list[Any]:
    """Run the operations in order; one result each: get -> Item or None, put -> None, search -> [Item],
    list_namespaces -> [namespace]. A batch that writes first sweeps expired items; its puts' texts are
    embedded ahead, in one call per model."""
    puts = [op for op in ops if isinstance(op, Put) and op.value is not None and op.index is not False]
    if puts:
        sweep(conn, scope)
    statements = [store_paths.statement(op.value or {}, _fields(op)) for op in puts]
    per_path = [
        (model_for_text(settings, said.strip()), text_)
        for op, said in zip(puts, statements, strict=True)
        for paths in [store_paths.index_texts(op.value or {}, _fields(op) or [])]
        if len(paths) > 1
        for text_ in paths
    ]
    with item_embedding.encoded_ahead(settings, statements, under=per_path):
        return [_run(conn, settings, scope, op) for op in ops]


def _run(conn: Connection, settings: Settings, scope: StoreScope, op: Op) -> Any:
    if isinstance(op, Get):
        return get(conn, scope, op)
    if isinstance(op, Put):
        put(conn, settings, scope, op)
        return None
    if isinstance(op, Search):
        return search(conn, settings, scope, op)
    return list_namespaces(conn, scope, op)


def _fields(op: Put) -> list[str] | None:
    return op.index if isinstance(op.index, list) else None


def _subject(namespace: Sequence[str], subject_at: int) -> str:
    return store_paths.subject_of(namespace[store_paths.subject_position(namespace, subject_at)])


def get(conn: Connection, scope: StoreScope, op: Get) -> Item | None:
    """The live item at (namespace, key) of the store's agent; restarts its ttl when asked."""
    found = _find(conn, scope, op.namespace, op.key)
    if found is None:
        return None
    if op.refresh_ttl:
        refresh(conn, scope, [found])
    return found.item


def _find(conn: Connection, scope: StoreScope, namespace: Sequence[str], key: str) -> _Row | None:
    name = store_paths.entry_name(namespace, key, scope.subject_at)
    try:
        item = api.find_memory(
            conn, scope.namespace, _subject(namespace, scope.subject_at), ENTRY_TYPE, name_key(name),
            agent_id=scope.agent,
        )  # fmt: skip
    except api.MemoryNotFound:
        return None
    meta = item.metadata.get(FIELD)
    if not (isinstance(meta, dict) and meta.get("namespace") == list(namespace) and meta.get("key") == key):
        return None
    if item.agent != scope.agent or not isinstance(item.value, dict):
        return None
    return _row(item.id, item.metadata, item.value, item.created_at, item.updated_at, None)


def put(conn: Connection, settings: Settings, scope: StoreScope, op: Put) -> None:
    """Write (or, value None, delete: versioned) the item; embeds its texts, sets its time to live."""
    found = _find(conn, scope, op.namespace, op.key)
    if op.value is None:
        if found is not None:
            api.delete_memory(conn, scope.namespace, found.item_id, agent_id=scope.agent)
        return
    fields = _fields(op)
    paths = [] if op.index is False else store_paths.index_texts(op.value, fields or [])
    embedded = op.index is not False and (fields is None or bool(paths))
    meta: dict[str, Any] = {"namespace": list(op.namespace), "key": op.key}
    if op.index is not None:
        meta["index"] = op.index
    if op.ttl is not None:
        meta["ttl"] = op.ttl
    if not embedded:
        meta["embedded"] = False
    statement = store_paths.statement(op.value, fields)
    embed = settings if embedded else None
    if found is None:
        written = api.create_memory(
            conn, scope.namespace, _subject(op.namespace, scope.subject_at), ENTRY_TYPE,
            store_paths.entry_name(op.namespace, op.key, scope.subject_at), op.value, statement=statement,
            agent_id=scope.agent, metadata={FIELD: meta}, settings=embed,
        )  # fmt: skip
    else:
        written = api.update_memory(
            conn, scope.namespace, found.item_id, agent_id=scope.agent, value=op.value,
            statement=statement, metadata={FIELD: meta}, settings=embed,
        )  # fmt: skip
    vectors: list[str] = []
    if embedded and len(paths) > 1:
        model = model_for_text(settings, statement.strip())
        vectors = [_vector_text(v) for v in item_embedding.vectors_under(settings, model, paths)]
    if (
        found is not None or written.item.version > 1 or op.ttl is not None or vectors
    ):  # a new row has neither
        params = {
            "namespace": scope.namespace,
            "item_id": written.item.id,
            "ttl": op.ttl,
            "paths": vectors or None,
        }
        conn.execute(SET_EXPIRY_AND_PATHS, params)


def _vector_text(vector: Any) -> str:
    return "[" + ",".join(f"{float(x):.7g}" for x in vector) + "]"


def search(conn: Connection, settings: Settings, scope: StoreScope, op: Search) -> list[Item]:
    """The items under the prefix that meet the filter: with a query, the best offset + limit of the
    ranking, then the unranked ones (score None); without, newest first. Restarts the ttl of the page."""
    bind = Bound()
    reach = len(op.prefix) > scope.subject_at
    subject = _subject(op.prefix, scope.subject_at) if reach else None
    end = op.offset + op.limit
    if op.query and op.query.strip():
        ranked = f"{_condition(scope, op, bind, 'i')} and {RANKED.format(a='i')}"
        hits = search_memories(  # the ranking ends at MAX_RANKED: past it, the unranked items follow
            conn, settings, scope.namespace, op.query, subject, agent_id=scope.agent,
            limit=min(end, MAX_RANKED), threshold=op.threshold, item_filter=ItemFilter(ranked, bind.params),
        )  # fmt: skip
        found = [_row(h.id, h.metadata, h.value, h.created_at, h.updated_at, h.score) for h in hits]
        page = found[op.offset : end]
        if len(found) < end and op.threshold is None:
            unranked = f"{_condition(scope, op, bind, 'mi')} and not ({RANKED.format(a='mi')})"
            skip = max(0, op.offset - len(found))
            page += _listed(conn, scope, unranked, bind, subject, end - max(op.offset, len(found)), skip)
    else:
        page = _listed(conn, scope, _condition(scope, op, bind, "mi"), bind, subject, op.limit, op.offset)
    if op.refresh_ttl:
        refresh(conn, scope, page)
    return [row.item for row in page]


def _condition(scope: StoreScope, op: Search, bind: Bound, a: str) -> str:
    """The store's items (of its agent) under the prefix that meet the filter, over memory_items `a`."""
    namespace = NAMESPACE.format(a=a)
    parts = [f"{a}.metadata ? '{FIELD}'", f"{a}.agent_id is not distinct from {bind(scope.agent, 'text')}"]
    parts += [f"{namespace} ->> {i} = {bind(label, 'text')}" for i, label in enumerate(op.prefix)]
    for path, wanted in (op.filter or {}).items():
        if not isinstance(path, str):  # "" too: the field named "" (the schema allows any NUL-free key)
            raise FilterError("filter", "filter keys are field paths (dotted)")
        x = f"({a}.value #> {bind(path.split('.'), 'text[]')})"
        where = f"filter.{path}"
        if isinstance(wanted, Mapping) and wanted and all(k in STORE_OPERATORS for k in wanted):
            parts += [
                json_condition(x, STORE_OPERATORS[k], v, bind, f"{where}.{k}") for k, v in wanted.items()
            ]
        else:
            parts.append(json_condition(x, "eq", wanted, bind, where))
    return " and ".join(f"coalesce({p}, false)" for p in parts)


def _listed(
    conn: Connection,
    scope: StoreScope,
    condition: str,
    bind: Bound,
    subject: str | None,
    limit: int,
    offset: int,
) -> list[_Row]:
    mine = "mi.subject_id = cast(:subject as text)" if subject is not None else "true"
    query = text(
        f"""select {ITEM_SELECT} from memory_items as mi
        where mi.namespace = :namespace and {LIVE} and {mine} and {condition}
        order by mi.updated_at desc, mi.item_id desc limit :limit offset :offset"""
    )
    params = {
        **bind.params,
        "namespace": scope.namespace,
        "subject": subject,
        "limit": limit,
        "offset": offset,
    }
    return [
        _row(r["item_id"], r["metadata"], r["value"], r["created_at"], r["updated_at"], None)
        for r in conn.execute(query, params).mappings()
    ]


def _row(
    item_id: int, metadata: Any, value: Any, created: datetime, updated: datetime, score: float | None
) -> _Row:
    meta = (metadata or {}).get(FIELD) or {}
    shown = None if score is None else round(min(1.0, max(0.0, float(score))), 6)
    item = Item(tuple(meta.get("namespace") or ()), str(meta.get("key")), value, created, updated, shown)
    return _Row(item_id, item, isinstance(meta.get("ttl"), int | float))


def list_namespaces(conn: Connection, scope: StoreScope, op: ListNamespaces) -> list[tuple[str, ...]]:
    """The namespaces of the store's live items that meet the match conditions (a prefix or suffix of labels,
    "*" any one label), cut to max_depth, distinct, in order, one page: all in SQL."""
    bind = Bound()
    parts = []
    for match in op.conditions:
        n = len(match.path)
        parts.append(f"cardinality(t.labels) >= {n}")
        for i, label in enumerate(match.path):
            if label != "*":
                at = f"{i + 1}" if match.kind == "prefix" else f"cardinality(t.labels) - {n - 1 - i}"
                parts.append(f"t.labels[{at}] = {bind(label, 'text')}")
    depth = f"t.labels[1:{bind(op.max_depth, 'int')}]" if op.max_depth else "t.labels"
    query = text(
        f"""select distinct {depth} as labels from (
            select array(select jsonb_array_elements_text({NAMESPACE.format(a="mi")})) as labels
            from memory_items as mi
            where mi.namespace = :namespace and {LIVE} and mi.metadata ? '{FIELD}'
                and mi.agent_id is not distinct from cast(:store_agent as text)) as t
        where {" and ".join(parts) or "true"}
        order by labels limit :limit offset :offset"""
    )
    params = {
        **bind.params, "namespace": scope.namespace, "store_agent": scope.agent, "limit": op.limit,
        "offset": op.offset,
    }  # fmt: skip
    return [tuple(row.labels) for row in conn.execute(query, params)]


def refresh(conn: Connection, scope: StoreScope, rows: Sequence[_Row]) -> None:
    """Restart the time to live of the live items read that have one (a read-only request restarts none)."""
    timed = [row.item_id for row in rows if row.timed]
    if timed and scope.may_write:
        conn.execute(REFRESH, {"namespace": scope.namespace, "item_ids": timed})


def sweep(conn: Connection, scope: StoreScope, limit: int = SWEEP) -> list[int]:
    """Delete (versioned) up to `limit` of the agent's items whose time to live has passed."""
    params = {"namespace": scope.namespace, "store_agent": scope.agent, "limit": limit}
    rows = conn.execute(SELECT_EXPIRED, params).mappings().all()
    for row in rows:
        api.delete_row(conn, scope.namespace, row)
    return [int(row["item_id"]) for row in rows]
