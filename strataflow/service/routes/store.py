"""POST /v1/store/batch: LangGraph's BaseStore operations (strataflow.integrations.langgraph) over the one L2
API, one request per batch.

Mapping: a namespace is a tuple of labels, one of which (position `subject_at`, default 1: LangMem's
("memories", user_id)) is the user, i.e. the subject; an item is an entry of that subject (type `user`) whose
name is the other labels and the key joined by "/" ("memories/k1"), whose value is the item's value as given
(JSON), and whose statement, embedded when written, is the value's text (its `content`, else its fields), so
a put is searchable at once. `metadata.langgraph` keeps the namespace and key. A put of null deletes the item
(versioned: its history stays). Search ranks with the one ranking (strataflow.retrieval.item_search) within a
subject, or the namespace when the prefix stops before the user; `filter` applies to value fields.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter
from sqlalchemy import Connection

from models.memory_items import MemoryItem
from strataflow.config import Settings
from strataflow.memory import api, item_sets
from strataflow.memory.item_fields import MAX_CONTENT_CHARS, name_key
from strataflow.retrieval.item_search import search_memories
from strataflow.service.agents import acting_agent
from strataflow.service.deps import CallerDep, DbDep, SettingsDep
from strataflow.service.errors import ApiError, error_responses
from strataflow.service.keys import Caller
from strataflow.service.store_schemas import StoreBatch, StoreItem, StoreOp, StoreResults

router = APIRouter(prefix="/v1/store", tags=["langgraph store"])
ENTRY_TYPE = "user"
FIELD = "langgraph"  # metadata field: {"namespace": [...], "key": ...}
MAX_LISTED = 10_000
COMPARE = {
    "$eq": lambda a, b: a == b, "$ne": lambda a, b: a != b, "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b, "$lt": lambda a, b: a < b, "$lte": lambda a, b: a <= b,
    "$in": lambda a, b: a in b, "$nin": lambda a, b: a not in b,
}  # fmt: skip


@router.post("/batch", response_model=StoreResults, responses=error_responses())
def batch(body: StoreBatch, db: DbDep, caller: CallerDep, settings: SettingsDep) -> StoreResults:
    """Run the operations in order in one transaction; one result each (see StoreResults)."""
    body = body.model_copy(update={"agent": acting_agent(caller, body.agent)})
    results: list[Any] = []
    for position, op in enumerate(body.ops):
        run = {"get": _get, "put": _put, "search": _search, "list_namespaces": _namespaces}[op.op]
        try:
            results.append(run(db, caller, settings, op, body))
        except ApiError as exc:
            exc.field = f"ops.{position}.{exc.field}" if exc.field else f"ops.{position}"
            raise
    return StoreResults(results=results)


def _subject(namespace: list[str], body: StoreBatch, required: bool = True) -> str | None:
    if len(namespace) > body.subject_at:
        return namespace[body.subject_at]
    if required:
        raise ApiError(
            422, f"namespace {tuple(namespace)} has no user id at position {body.subject_at}", "namespace"
        )
    return None


def _name(namespace: list[str], key: str, body: StoreBatch) -> str:
    labels = [label for i, label in enumerate(namespace) if i != body.subject_at]
    return "/".join([*labels, key])


def _text(value: Mapping[str, Any]) -> str:
    """The statement of a value: its `content` text, else its fields as `name: value`."""
    content = value.get("content")
    if isinstance(content, str) and content.strip():
        text = content
    else:
        parts = [
            f"{k}: {v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}" for k, v in value.items()
        ]
        text = "; ".join(parts) or "{}"
    return text[:MAX_CONTENT_CHARS]


def _item(item: MemoryItem, score: float | None = None) -> StoreItem | None:
    meta = item.metadata.get(FIELD)
    if not isinstance(meta, dict) or not isinstance(item.value, dict):
        return None
    return StoreItem(
        namespace=list(meta["namespace"]), key=str(meta["key"]), value=item.value, created_at=item.created_at,
        updated_at=item.updated_at, score=None if score is None else round(min(1.0, max(0.0, score)), 6),
    )  # fmt: skip


def _find(db: Connection, caller: Caller, op: StoreOp, body: StoreBatch) -> MemoryItem | None:
    subject, key = _subject(op.namespace, body), op.key or ""
    try:
        item = api.find_memory(
            db, caller.namespace, str(subject), ENTRY_TYPE, name_key(_name(op.namespace, key, body)),
            agent_id=body.agent,
        )  # fmt: skip
    except api.MemoryNotFound:
        return None
    meta = item.metadata.get(FIELD)
    same = isinstance(meta, dict) and meta.get("namespace") == op.namespace and meta.get("key") == key
    return item if same and item.agent == body.agent else None


def _get(
    db: Connection, caller: Caller, settings: Settings, op: StoreOp, body: StoreBatch
) -> StoreItem | None:
    found = _find(db, caller, _keyed(op), body)
    return None if found is None else _item(found)


def _put(db: Connection, caller: Caller, settings: Settings, op: StoreOp, body: StoreBatch) -> None:
    if caller.kind != "agent":
        raise ApiError(403, f"key {caller.key_name!r} has the {caller.kind} role {caller.role!r}: read-only")
    found = _find(db, caller, _keyed(op), body)
    if op.value is None:
        if found is not None:
            api.delete_memory(db, caller.namespace, found.id, agent_id=body.agent)
        return
    meta = {FIELD: {"namespace": op.namespace, "key": op.key}}
    if found is None:
        api.create_memory(
            db, caller.namespace, str(_subject(op.namespace, body)), ENTRY_TYPE,
            _name(op.namespace, str(op.key), body), op.value, statement=_text(op.value), agent_id=body.agent,
            metadata=meta, settings=settings,
        )  # fmt: skip
    else:
        api.update_memory(
            db, caller.namespace, found.id, agent_id=body.agent, value=op.value, statement=_text(op.value),
            settings=settings,
        )  # fmt: skip


def _keyed(op: StoreOp) -> StoreOp:
    if not op.key or not op.namespace:
        raise ApiError(422, f"{op.op} needs a namespace and a key", "key")
    return op


def _search(
    db: Connection, caller: Caller, settings: Settings, op: StoreOp, body: StoreBatch
) -> list[StoreItem]:
    subject = _subject(op.namespace, body, required=False)
    wanted = op.offset + op.limit
    found: list[tuple[MemoryItem, float | None]] = []
    if op.query and op.query.strip():
        hits = search_memories(
            db, settings, caller.namespace, op.query, subject, agent_id=body.agent,
            limit=min(1000, max(50, wanted * 4)),
        )  # fmt: skip
        found = [(hit, hit.score) for hit in hits]
    else:
        cursor: str | None = None
        while len(found) < MAX_LISTED:
            page = api.list_memories(
                db, caller.namespace, subject, agent_id=body.agent, limit=500, cursor=cursor
            )
            found.extend((item, None) for item in page.entries)
            if (cursor := page.next_cursor) is None:
                break
    items = [_item(item, score) for item, score in found]
    kept = [
        item
        for item in items
        if item is not None
        and item.namespace[: len(op.namespace)] == op.namespace
        and _matches(item.value, op)
    ]
    return kept[op.offset : wanted]


def _matches(value: Mapping[str, Any], op: StoreOp) -> bool:
    for path, condition in (op.filter or {}).items():
        actual: Any = value
        for part in path.split("."):
            actual = actual.get(part) if isinstance(actual, Mapping) else None
        tests = condition.items() if isinstance(condition, Mapping) else [("$eq", condition)]
        for operator, operand in tests:
            if operator not in COMPARE:
                raise ApiError(400, f"filter {path}: operator {operator!r} is not supported", "filter")
            try:
                if not COMPARE[operator](actual, operand):
                    return False
            except TypeError:
                return False
    return True


def _namespaces(
    db: Connection, caller: Caller, settings: Settings, op: StoreOp, body: StoreBatch
) -> list[list[str]]:
    values = item_sets.metadata_values(db, caller.namespace, [FIELD, "namespace"], agent_id=body.agent)
    found = {tuple(v) for v in values if isinstance(v, list)}
    kept = sorted({ns[: op.max_depth] if op.max_depth else ns for ns in found if _namespace_matches(ns, op)})
    return [list(ns) for ns in kept[op.offset : op.offset + op.limit]]


def _namespace_matches(namespace: tuple[str, ...], op: StoreOp) -> bool:
    for condition in op.match_conditions:
        path = condition.path
        if len(path) > len(namespace):
            return False
        labels = namespace[: len(path)] if condition.match_type == "prefix" else namespace[-len(path) :]
        if any(want not in ("*", got) for want, got in zip(path, labels, strict=True)):
            return False
    return True
