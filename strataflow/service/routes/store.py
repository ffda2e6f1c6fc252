"""POST /v1/store/batch: LangGraph's BaseStore operations (strataflow.integrations.langgraph) over the one L2
API, one request and one transaction per batch.

Mapping (strataflow.memory.adapters): a namespace is a tuple of labels, one of which (position `subject_at`,
default 1: LangMem's ("memories", user_id)) is the user, i.e. the subject; an item is an entry of that subject
(type `user`) named by adapters.store_entry_name (the other labels and the key, escaped, so a key holding "/"
is never a deeper namespace's item), whose value is the item's value as given (JSON), and whose statement,
embedded when written, is adapters.store_text of the value (the `index` fields, else its `content`, else its
fields), so a put is searchable at once; `index=False` is not embedded and never ranked by meaning (a search
fills with such items after the ranked ones, score null, as LangGraph's stores do). `metadata.langgraph`
keeps the namespace, key, index and time to live. A put of null deletes the item (versioned: its history
stays). `ttl` (minutes) expires an item at read time; reads restart it unless refresh_ttl is false; each
batch that writes sweeps up to 100 expired items of its agent. Search ranks with the one ranking
(strataflow.retrieval.item_search) within a subject, or the namespace when the prefix stops before the user;
`filter` applies to value fields (adapters.value_matches). A namespace shorter than `subject_at` has its last
label as the user.
"""

from __future__ import annotations

import re
import time
from typing import Any

from fastapi import APIRouter
from sqlalchemy import Connection

from models.memory_items import MemoryItem
from models.messages import SAFE_ID
from strataflow.config import Settings
from strataflow.memory import adapters, api, item_embedding, item_sets
from strataflow.memory.item_fields import name_key
from strataflow.retrieval.item_search import search_memories
from strataflow.service.deps import ActingDep, DbDep, SettingsDep, work
from strataflow.service.errors import ApiError, error_responses
from strataflow.service.keys import Caller
from strataflow.service.schemas import ID_MAX
from strataflow.service.store_schemas import (
    MAX_SEARCH_OPS,
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
FIELD = "langgraph"  # metadata field: {"namespace": [...], "key", "index", "ttl", "expires_at"}
SUBJECT = re.compile(SAFE_ID)


@router.post(
    "/batch", response_model=StoreResults, responses=error_responses(),
    dependencies=[work("store_batch", "heavy")],
)  # fmt: skip
def batch(body: StoreBatch, db: DbDep, acting: ActingDep, settings: SettingsDep) -> StoreResults:
    """Run the operations in order in one transaction; one result each (see StoreResults)."""
    caller = acting.caller
    body = body.model_copy(update={"agent": acting.agent})
    searches = sum(isinstance(op, SearchOp) for op in body.ops)
    if searches > MAX_SEARCH_OPS:
        raise ApiError(
            422, f"a batch runs at most {MAX_SEARCH_OPS} search operations, got {searches}", "ops",
            code="too_many_searches",
        )  # fmt: skip
    for op in body.ops:
        if isinstance(op, (GetOp, PutOp)):
            _subject(op.namespace, body)
    if any(isinstance(op, PutOp) for op in body.ops):
        acting.require_writer()
        item_sets.delete_expired(db, caller.namespace, [FIELD], agent_id=body.agent)
    puts = [op for op in body.ops if isinstance(op, PutOp) and op.value is not None and op.index is not False]
    with item_embedding.encoded_ahead(
        settings, [adapters.store_text(op.value or {}, _fields(op)) for op in puts]
    ):
        return StoreResults(results=[_run(db, caller, settings, op, body) for op in body.ops])


def _fields(op: PutOp) -> list[str] | None:
    return op.index if isinstance(op.index, list) else None


def _run(db: Connection, caller: Caller, settings: Settings, op: Any, body: StoreBatch) -> Any:
    """One operation's result: get -> an item or None; put -> None; search -> items; list -> namespaces."""
    if isinstance(op, GetOp):
        found = _find(db, caller, op.namespace, op.key, body)
        live = None if found is None else _item(found)
        if found is not None and live is not None and op.refresh_ttl:
            _refresh(db, caller, [found])
        return live
    if isinstance(op, PutOp):
        _put(db, caller, settings, op, body)
        return None
    if isinstance(op, SearchOp):
        return _search(db, caller, settings, op, body)
    return _namespaces(db, caller, op, body)


def _subject_at(namespace: list[str], body: StoreBatch) -> int:
    """Where the user is: the label at subject_at, or the last label of a shorter namespace."""
    return min(body.subject_at, len(namespace) - 1)


def _subject(namespace: list[str], body: StoreBatch) -> str:
    """The label that is the user, which must be a subject id (422 naming it otherwise)."""
    at = _subject_at(namespace, body)
    label = namespace[at]
    if len(label) > ID_MAX or not SUBJECT.match(label):
        raise ApiError(
            422, f"namespace label {at} is the user (subject_at): at most {ID_MAX} characters, no '/' or "
            "control characters", f"namespace.{at}", code="invalid_value",
        )  # fmt: skip
    return label


def _name(namespace: list[str], key: str, body: StoreBatch) -> str:
    return adapters.store_entry_name(namespace, key, _subject_at(namespace, body))


def _item(item: MemoryItem, score: float | None = None) -> StoreItem | None:
    """The store item of an entry; None for an entry that is not one, or whose time to live has passed."""
    meta = item.metadata.get(FIELD)
    if not isinstance(meta, dict) or not isinstance(item.value, dict):
        return None
    expires = meta.get("expires_at")
    if isinstance(expires, (int, float)) and expires < time.time():
        return None
    return StoreItem(
        namespace=list(meta["namespace"]), key=str(meta["key"]), value=item.value, created_at=item.created_at,
        updated_at=item.updated_at, score=None if score is None else round(min(1.0, max(0.0, score)), 6),
    )  # fmt: skip


def _indexed(item: MemoryItem) -> bool:
    meta = item.metadata.get(FIELD)
    return not (isinstance(meta, dict) and meta.get("index") is False)


def _find(
    db: Connection, caller: Caller, namespace: list[str], key: str, body: StoreBatch
) -> MemoryItem | None:
    subject = _subject(namespace, body)
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
    found = _find(db, caller, op.namespace, op.key, body)
    if op.value is None:
        if found is not None:
            api.delete_memory(db, caller.namespace, found.id, agent_id=body.agent)
        return
    meta: dict[str, Any] = {"namespace": op.namespace, "key": op.key}
    if op.index is not None:
        meta["index"] = op.index
    if op.ttl is not None:
        meta.update(ttl=op.ttl, expires_at=time.time() + op.ttl * 60)
    statement = adapters.store_text(op.value, _fields(op))
    embed = settings if op.index is not False else None  # index=False: not embedded
    if found is None:
        api.create_memory(
            db, caller.namespace, _subject(op.namespace, body), ENTRY_TYPE, _name(op.namespace, op.key, body),
            op.value, statement=statement, agent_id=body.agent, metadata={FIELD: meta}, settings=embed,
        )  # fmt: skip
    else:
        api.update_memory(
            db, caller.namespace, found.id, agent_id=body.agent, value=op.value, statement=statement,
            metadata={FIELD: meta}, settings=embed,
        )  # fmt: skip


def _search(
    db: Connection, caller: Caller, settings: Settings, op: SearchOp, body: StoreBatch
) -> list[StoreItem]:
    subject = op.namespace[body.subject_at] if len(op.namespace) > body.subject_at else None
    wanted = op.offset + op.limit
    every = item_sets.every_memory(db, caller.namespace, subject, agent_id=body.agent)
    listed: list[tuple[MemoryItem, float | None]] = [(item, None) for item in every]
    found = listed
    if op.query and op.query.strip():
        hits = search_memories(
            db, settings, caller.namespace, op.query, subject, agent_id=body.agent,
            limit=min(1000, max(50, wanted * 4)), threshold=op.threshold,
        )  # fmt: skip
        ranked = [(hit, hit.score) for hit in hits if _indexed(hit)]
        found = ranked + [(item, None) for item, _ in listed if not _indexed(item)]  # as LangGraph: after
    kept: list[tuple[int, StoreItem]] = []
    for item, score in found:
        shown = _item(item, score)
        if (
            shown is not None
            and shown.namespace[: len(op.namespace)] == op.namespace
            and adapters.value_matches(shown.value, op.filter or {})
        ):
            kept.append((item.id, shown))
    page = kept[op.offset : wanted]
    if op.refresh_ttl:
        _refresh(db, caller, [item for item, _ in found if item.id in {item_id for item_id, _ in page}])
    return [shown for _, shown in page]


def _refresh(db: Connection, caller: Caller, items: list[MemoryItem]) -> None:
    """Restart the time to live of the items read that have one (a read-only key's reads restart nothing)."""
    timed = [
        item.id for item in items if isinstance((item.metadata.get(FIELD) or {}).get("ttl"), (int, float))
    ]
    if timed and caller.kind == "agent":
        item_sets.refresh_expiry(db, caller.namespace, timed, [FIELD])


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
