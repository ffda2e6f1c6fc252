"""Memory CRUD over L2 (seed 003 memory provider): save, update, delete, get, list and search of memory items,
scoped by namespace (+ agent_id) and subject.

Every write goes through strataflow.memory.store (upsert_item / delete_item with source="manual"), so manual
edits are versioned in memory_item_versions exactly like extracted ones, and extraction never silently
overwrites a manual item. The caller owns the transaction (the CLI uses engine.begin()).

Seed 003 entry types map onto the one kind enum: user -> fact, project -> meta, feedback and reference stay
(strataflow.memory.entries keeps the seed's name, description, content and type). Agent scope: the item
identity is (namespace, subject_id, agent_id, kind, key); a write with agent_id writes that agent's item.
Reads given an agent_id see the items visible to that agent: its own, the namespace's (no agent) and other
agents' shared ones (is_shared); reads without one see no agent's private items. Search is full-text over
memory_items (English stemming plus jieba-segmented Chinese, OR-ed words ranked by ts_rank) plus a substring
match on key, name and statement for short or partial words; it needs no embedding, so an item saved a second
ago is found.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Connection, text

from models import vocabulary
from models.common import MemoryKind
from strataflow.memory import store

SEED_003_TYPES = {"user": "fact", "project": "meta", "feedback": "feedback", "reference": "reference"}
# Kinds only the pipeline writes (the hot summary the context injects first): no surface accepts them.
INTERNAL_KINDS = frozenset({MemoryKind.hot_summary.value})
ITEM_COLUMNS = """
    mi.item_id, mi.namespace, mi.subject_id, mi.agent_id, mi.kind, mi.key, mi.value, mi.statement,
    mi.category, mi.importance, mi.confidence, mi.status, mi.source, mi.version, mi.valid_from,
    mi.recorded_at, mi.updated_at, mi.created_at,
    mi.source_message_ids, mi.metadata, mi.name, mi.description, mi.entry_type, mi.is_shared
"""
# What an agent sees: its own items, the namespace's (no agent) and other agents' shared ones; a viewer with
# no agent (agent_id null) sees no agent's private items.
AGENT_VISIBLE = """
    (mi.agent_id is null or mi.is_shared or mi.agent_id = cast(:agent_id as text))
"""
SCOPE_FILTER = f"""
    mi.namespace = :namespace
    and (cast(:subject_id as text) is null or mi.subject_id = :subject_id)
    and {AGENT_VISIBLE}
    and (cast(:kind as text) is null or mi.kind = :kind)
    and (:include_deleted or mi.status = 'active')
"""
SELECT_BY_ID = text(
    f"select {ITEM_COLUMNS} from memory_items as mi where mi.item_id = :item_id and {SCOPE_FILTER}"
)
SELECT_BY_KEY = text(
    f"""
    select {ITEM_COLUMNS} from memory_items as mi
    where mi.key = :key and {SCOPE_FILTER}
    order by mi.agent_id is not distinct from :agent_id desc, mi.agent_id nulls first
    """
)
SELECT_LIST = text(
    f"""
    select {ITEM_COLUMNS} from memory_items as mi
    where {SCOPE_FILTER} and mi.kind <> 'hot_summary'
    order by mi.subject_id, mi.importance desc, mi.updated_at desc, mi.item_id
    limit :limit offset :offset
    """
)
SELECT_VERSIONS = text(
    """
    select version, action, value, statement, category, importance, confidence, status, source, valid_from,
        valid_to, recorded_at, superseded_at, run_id, model, note
    from memory_item_versions
    where item_id = :item_id and namespace = :namespace
    order by recorded_at, version_id
    """
)


class MemoryNotFound(LookupError):
    """No memory item matches; the message names the scope and the id or key asked for."""


class MemoryItem(BaseModel):
    item_id: int
    namespace: str
    subject_id: str
    agent_id: str | None
    kind: str
    key: str
    value: Any
    statement: str | None
    category: str | None
    importance: int
    confidence: float
    status: str
    source: str
    version: int
    valid_from: datetime
    recorded_at: datetime
    updated_at: datetime
    created_at: datetime
    source_message_ids: list[int]
    metadata: dict[str, Any]
    name: str | None = None
    description: str | None = None
    entry_type: str | None = None
    is_shared: bool = False


class MemoryVersion(BaseModel):
    version: int
    action: str
    value: Any
    statement: str | None
    category: str | None
    importance: int | None
    confidence: float | None
    status: str
    source: str
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    superseded_at: datetime | None
    run_id: Any | None
    model: str | None
    note: str | None


class MemoryWrite(BaseModel):
    """The outcome of a write: what the store did (new, content_modified, modified, unchanged, deleted)
    and the item as it is now."""

    action: str
    item: MemoryItem


class MemoryHit(BaseModel):
    score: float
    item: MemoryItem


def normalize_kind(kind: str) -> str:
    """A MemoryKind value from a kind or a seed 003 type (user, project, feedback, reference); an internal
    kind (hot_summary: the pipeline's own) is refused like an unknown one."""
    name = kind.strip().lower()
    name = SEED_003_TYPES.get(name, name)
    try:
        if name in INTERNAL_KINDS:
            raise ValueError(name)
        return MemoryKind(name).value
    except ValueError:
        allowed = ", ".join(k.value for k in MemoryKind if k.value not in INTERNAL_KINDS)
        raise ValueError(f"memory kind {kind!r} is not one of {allowed} (or user, project)") from None


def normalize_key(key: str) -> str:
    """snake_case key: 'Job Title' -> job_title, 'currentJobTitle' -> job_title (models.vocabulary's one
    normaliser); raises ValueError naming the field when nothing is left."""
    return vocabulary.normalize_key(key)


def save_memory(
    conn: Connection,
    namespace: str,
    subject_id: str,
    kind: str,
    key: str,
    value: Any,
    statement: str | None = None,
    *,
    agent_id: str | None = None,
    category: str | None = None,
    importance: int | None = None,
    confidence: float = 1.0,
    metadata: dict[str, Any] | None = None,
) -> MemoryWrite:
    """Create or overwrite (kind, key) in the agent's scope of the subject as a manual, versioned write."""
    kind, key = normalize_kind(kind), normalize_key(key)
    if importance is not None and not 0 <= importance <= 100:
        raise ValueError(f"memory item {kind}:{key}: importance must be 0-100, got {importance}")
    current = get_item_by_identity(conn, namespace, subject_id, agent_id, kind, key)
    action = store.upsert_item(
        conn, namespace=namespace, subject_id=subject_id, kind=kind, key=key, value=value,
        statement=statement or _default_statement(key, value), category=category, importance=importance,
        confidence=confidence, source="manual", event_at=write_time(current), agent_id=agent_id,
        metadata=metadata,
    )  # fmt: skip
    item = get_item_by_identity(conn, namespace, subject_id, agent_id, kind, key)
    assert item is not None
    return MemoryWrite(action=action, item=item)


def update_memory(
    conn: Connection,
    namespace: str,
    subject_id: str,
    *,
    item_id: int | None = None,
    kind: str | None = None,
    key: str | None = None,
    agent_id: str | None = None,
    **changes: Any,
) -> MemoryWrite:
    """Change fields (value, statement, category, importance, confidence, metadata) of an existing active
    item, found by item_id or by (kind, key); raises MemoryNotFound."""
    allowed = {"value", "statement", "category", "importance", "confidence", "metadata"}
    unknown = set(changes) - allowed
    if unknown:
        raise ValueError(f"memory update: unknown field(s) {sorted(unknown)}; allowed: {sorted(allowed)}")
    current = _require(conn, namespace, subject_id, item_id, kind, key, agent_id)
    value = changes.get("value", current.value)
    statement = changes.get("statement")
    if statement is None:
        statement = _default_statement(current.key, value) if "value" in changes else current.statement
    return save_memory(
        conn, namespace, current.subject_id, current.kind, current.key, value, statement,
        agent_id=current.agent_id, category=changes.get("category", current.category),
        importance=changes.get("importance", current.importance),
        confidence=changes.get("confidence", current.confidence), metadata=changes.get("metadata"),
    )  # fmt: skip


def delete_memory(
    conn: Connection,
    namespace: str,
    subject_id: str,
    *,
    item_id: int | None = None,
    kind: str | None = None,
    key: str | None = None,
    agent_id: str | None = None,
) -> MemoryWrite:
    """Mark an active item deleted (a new version, action deleted); raises MemoryNotFound."""
    current = _require(conn, namespace, subject_id, item_id, kind, key, agent_id)
    store.delete_item(
        conn, namespace=namespace, subject_id=current.subject_id, kind=current.kind, key=current.key,
        event_at=write_time(current), source="manual", agent_id=current.agent_id,
    )  # fmt: skip
    item = get_memory(conn, namespace, current.subject_id, item_id=current.item_id, include_deleted=True)
    assert item is not None
    return MemoryWrite(action="deleted", item=item)


def get_memory(
    conn: Connection,
    namespace: str,
    subject_id: str | None = None,
    *,
    item_id: int | None = None,
    kind: str | None = None,
    key: str | None = None,
    agent_id: str | None = None,
    include_deleted: bool = False,
) -> MemoryItem | None:
    """One item by item_id, or by (kind, key) within the subject; None when there is none in this scope."""
    if item_id is not None:
        params = scope_params(namespace, subject_id, agent_id, None, include_deleted) | {"item_id": item_id}
        row = conn.execute(SELECT_BY_ID, params).mappings().first()
        return None if row is None else MemoryItem(**row)
    if kind is None or key is None or subject_id is None:
        raise ValueError("memory get: give an item id, or a subject with a kind and a key")
    return _get_by_key(conn, namespace, subject_id, normalize_kind(kind), key, agent_id, include_deleted)


def list_memories(
    conn: Connection,
    namespace: str,
    subject_id: str | None = None,
    *,
    agent_id: str | None = None,
    kind: str | None = None,
    include_deleted: bool = False,
    limit: int = 100,
    offset: int = 0,
) -> list[MemoryItem]:
    """Items of the scope, most important first (hot summaries left out)."""
    params = scope_params(namespace, subject_id, agent_id, kind and normalize_kind(kind), include_deleted)
    rows = conn.execute(SELECT_LIST, params | {"limit": limit, "offset": offset}).mappings()
    return [MemoryItem(**row) for row in rows]


def memory_history(conn: Connection, namespace: str, item_id: int) -> list[MemoryVersion]:
    """Every version of an item of namespace, oldest first (valid_from/valid_to, recorded_at/superseded_at);
    empty when the item is not in namespace."""
    params = {"item_id": item_id, "namespace": namespace}
    return [MemoryVersion(**row) for row in conn.execute(SELECT_VERSIONS, params).mappings()]


def scope_params(
    namespace: str, subject_id: str | None, agent_id: str | None, kind: str | None, include_deleted: bool
) -> dict[str, Any]:
    return {
        "namespace": namespace, "subject_id": subject_id, "agent_id": agent_id, "kind": kind,
        "include_deleted": include_deleted,
    }  # fmt: skip


SELECT_BY_IDENTITY = text(
    f"""
    select {ITEM_COLUMNS} from memory_items as mi
    where mi.namespace = :namespace and mi.subject_id = :subject_id
        and mi.agent_id is not distinct from :agent_id and mi.kind = :kind and mi.key = :key
    """
)


def get_item_by_identity(
    conn: Connection, namespace: str, subject_id: str, agent_id: str | None, kind: str, key: str
) -> MemoryItem | None:
    """The one item (active or deleted) with this identity."""
    params = {
        "namespace": namespace,
        "subject_id": subject_id,
        "agent_id": agent_id,
        "kind": kind,
        "key": key,
    }
    row = conn.execute(SELECT_BY_IDENTITY, params).mappings().first()
    return None if row is None else MemoryItem(**row)


def _get_by_key(
    conn: Connection,
    namespace: str,
    subject_id: str,
    kind: str,
    key: str,
    agent_id: str | None,
    include_deleted: bool,
) -> MemoryItem | None:
    params = scope_params(namespace, subject_id, agent_id, kind, include_deleted) | {"key": key}
    row = conn.execute(SELECT_BY_KEY, params).mappings().first()
    return None if row is None else MemoryItem(**row)


def _require(
    conn: Connection,
    namespace: str,
    subject_id: str,
    item_id: int | None,
    kind: str | None,
    key: str | None,
    agent_id: str | None,
) -> MemoryItem:
    item = get_memory(conn, namespace, subject_id, item_id=item_id, kind=kind, key=key, agent_id=agent_id)
    if item is None:
        which = f"id {item_id}" if item_id is not None else f"{kind}:{key}"
        raise MemoryNotFound(
            f"no active memory item {which} for subject {subject_id!r} in namespace {namespace!r}"
        )
    return item


def write_time(current: MemoryItem | None) -> datetime:
    """Now, or the current version's event time if that is later: a manual write always becomes current."""
    now = datetime.now(UTC)
    return (
        now if current is None or current.valid_from < now else current.valid_from + timedelta(microseconds=1)
    )


def _default_statement(key: str, value: Any) -> str:
    return f"{key.replace('_', ' ')}: {value}"
