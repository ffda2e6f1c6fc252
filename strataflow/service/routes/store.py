"""POST /v1/store/batch: LangGraph's BaseStore operations (strataflow.integrations.langgraph) over the one L2
API, one request per batch.

Mapping: a namespace is a tuple of labels, one of which (position `subject_at`, default 1: LangMem's
("memories", user_id)) is the user, i.e. the subject; an item is an entry of that subject (type `user`) whose
name is the other labels and the key joined by "/" ("memories/k1"), whose value is the item's value as given
(JSON), and whose statement, embedded when written, is the value's text (its `content`, else its fields), so
a put is searchable at once. `metadata.langgraph` keeps the namespace and key. A put of null deletes the item
(versioned: its history stays). Search ranks with the one ranking (strataflow.retrieval.item_search) within a
subject, or the namespace when the prefix stops before the user; `filter` applies to value fields. A
namespace shorter than `subject_at` has its last label as the user.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter
from sqlalchemy import Connection

from models.memory_items import MemoryItem
from strataflow.config import Settings
from strataflow.memory import api, item_sets
from strataflow.memory.item_fields import MAX_CONTENT_CHARS, MAX_NAME_CHARS, name_key
from strataflow.retrieval.item_search import search_memories
from strataflow.service.deps import CallerDep, DbDep, SettingsDep, require_writer
from strataflow.service.errors import error_responses
from strataflow.service.keys import Caller
from strataflow.service.store_schemas import (
    GetOp,
    ListNamespacesOp,
    PutOp,
    SearchOp,
    StoreBatch,
    StoreItem,
    StoreResults,
)

router = APIRouter(prefix="/v1/store", tags=["langgraph store"])
ENTRY_TYPE = "user"
FIELD = "langgraph"  # metadata field: {"namespace": [...], "key": ...}
COMPARE = {
    "$eq": lambda a, b: a == b, "$ne": lambda a, b: a != b, "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b, "$lt": lambda a, b: a < b, "$lte": lambda a, b: a <= b,
    "$in": lambda a, b: a in b, "$nin": lambda a, b: a not in b,
}  # fmt: skip


@router.post("/batch", response_model=StoreResults, responses=error_responses())
def batch(body: StoreBatch, db: DbDep, caller: CallerDep, settings: SettingsDep) -> StoreResults:
    """Run the operations in order in one transaction; one result each (see StoreResults)."""
    body = body.model_copy(update={"agent": caller.agent_for(body.agent)})
    results: list[Any] = []
    for op in body.ops:
        if isinstance(op, GetOp):
            found = _find(db, caller, op.namespace, op.key, body)
            results.append(None if found is None else _item(found))
        elif isinstance(op, PutOp):
            _put(db, caller, settings, op, body)
            results.append(None)
        elif isinstance(op, SearchOp):
            results.append(_search(db, caller, settings, op, body))
        else:
            results.append(_namespaces(db, caller, op, body))
    return StoreResults(results=results)


def _subject_at(namespace: list[str], body: StoreBatch) -> int:
    """Where the user is: the label at subject_at, or the last label of a shorter namespace."""
    return min(body.subject_at, len(namespace) - 1)


def _name(namespace: list[str], key: str, body: StoreBatch) -> str:
    """The entry name: the labels other than the user's and the key, joined by "/" (with a hash when long)."""
    at = _subject_at(namespace, body)
    name = "/".join([*(label for i, label in enumerate(namespace) if i != at), key])
    if len(name) <= MAX_NAME_CHARS:
        return name
    return f"{name[: MAX_NAME_CHARS - 14]} #{hashlib.sha256(name.encode()).hexdigest()[:12]}"


def _text(value: Mapping[str, Any]) -> str:
    """The statement of a value: its `content` text, else its fields as `name: value`."""
    content = value.get("content")
    if isinstance(content, str) and content.strip():
        return content[:MAX_CONTENT_CHARS]
    shown = {k: v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for k, v in value.items()}
    text = "; ".join(f"{k}: {v}" for k, v in shown.items())
    return text[:MAX_CONTENT_CHARS] if text.strip() else "{}"


def _item(item: MemoryItem, score: float | None = None) -> StoreItem | None:
    meta = item.metadata.get(FIELD)
    if not isinstance(meta, dict) or not isinstance(item.value, dict):
        return None
    return StoreItem(
        namespace=list(meta["namespace"]), key=str(meta["key"]), value=item.value, created_at=item.created_at,
        updated_at=item.updated_at, score=None if score is None else round(min(1.0, max(0.0, score)), 6),
    )  # fmt: skip


def _find(
    db: Connection, caller: Caller, namespace: list[str], key: str, body: StoreBatch
) -> MemoryItem | None:
    subject = namespace[_subject_at(namespace, body)]
    try:
        item = api.find_memory(
            db,
            caller.namespace,
            subject,
            ENTRY_TYPE,
            name_key(_name(namespace, key, body)),
            agent_id=body.agent,
        )
    except api.MemoryNotFound:
        return None
    meta = item.metadata.get(FIELD)
    same = isinstance(meta, dict) and meta.get("namespace") == namespace and meta.get("key") == key
    return item if same and item.agent == body.agent else None


def _put(db: Connection, caller: Caller, settings: Settings, op: PutOp, body: StoreBatch) -> None:
    require_writer(caller)
    found = _find(db, caller, op.namespace, op.key, body)
    if op.value is None:
        if found is not None:
            api.delete_memory(db, caller.namespace, found.id, agent_id=body.agent)
        return
    if found is None:
        api.create_memory(
            db, caller.namespace, op.namespace[_subject_at(op.namespace, body)], ENTRY_TYPE,
            _name(op.namespace, op.key, body), op.value, statement=_text(op.value), agent_id=body.agent,
            metadata={FIELD: {"namespace": op.namespace, "key": op.key}}, settings=settings,
        )  # fmt: skip
    else:
        api.update_memory(
            db, caller.namespace, found.id, agent_id=body.agent, value=op.value, statement=_text(op.value),
            settings=settings,
        )  # fmt: skip


def _search(
    db: Connection, caller: Caller, settings: Settings, op: SearchOp, body: StoreBatch
) -> list[StoreItem]:
    subject = op.namespace[body.subject_at] if len(op.namespace) > body.subject_at else None
    wanted = op.offset + op.limit
    found: list[tuple[MemoryItem, float | None]] = []
    if op.query and op.query.strip():
        hits = search_memories(
            db, settings, caller.namespace, op.query, subject, agent_id=body.agent,
            limit=min(1000, max(50, wanted * 4)), threshold=op.threshold,
        )  # fmt: skip
        found = [(hit, hit.score) for hit in hits]
    else:
        found = [
            (item, None)
            for item in item_sets.every_memory(db, caller.namespace, subject, agent_id=body.agent)
        ]
    items = [_item(item, score) for item, score in found]
    kept = [
        item
        for item in items
        if item is not None
        and item.namespace[: len(op.namespace)] == op.namespace
        and _matches(item.value, op.filter or {})
    ]
    return kept[op.offset : wanted]


def _matches(value: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether the value's fields (dotted paths) meet the filter: a value (equality) or operators."""
    for path, condition in wanted.items():
        actual: Any = value
        for part in path.split("."):
            actual = actual.get(part) if isinstance(actual, Mapping) else None
        operators = isinstance(condition, Mapping) and condition and all(op in COMPARE for op in condition)
        tests = condition.items() if operators else [("$eq", condition)]
        for operator, operand in tests:
            try:
                if not COMPARE[operator](actual, operand):
                    return False
            except TypeError:  # incomparable types (a text against a number): no match
                return False
    return True


def _namespaces(db: Connection, caller: Caller, op: ListNamespacesOp, body: StoreBatch) -> list[list[str]]:
    values = item_sets.metadata_values(db, caller.namespace, [FIELD, "namespace"], agent_id=body.agent)
    found = {tuple(v) for v in values if isinstance(v, list)}
    kept = sorted({ns[: op.max_depth] if op.max_depth else ns for ns in found if _namespace_matches(ns, op)})
    return [list(ns) for ns in kept[op.offset : op.offset + op.limit]]


def _namespace_matches(namespace: tuple[str, ...], op: ListNamespacesOp) -> bool:
    for condition in op.match_conditions:
        path = condition.path
        if len(path) > len(namespace):
            return False
        # namespace[-0:] is the whole tuple: an empty suffix must take no labels, so slice from the length.
        start = 0 if condition.match_type == "prefix" else len(namespace) - len(path)
        labels = namespace[start : start + len(path)]
        if any(want not in ("*", got) for want, got in zip(path, labels, strict=True)):
            return False
    return True
