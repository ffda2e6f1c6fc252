"""The one L2 memory API (the seed 003 memory provider; what the CLI, HTTP, MCP and the adapters call):
create, update, delete, get, find, list and history of the memory items of a namespace, one row type
(models.memory_items.MemoryItem), one error set (MemoryNotFound, MemoryConflict, MemoryForbidden; a field the
library refuses raises strataflow.memory.item_fields.MemoryFieldError, a ValueError naming the field).
Searching items uses the one retrieval ranking, so it is strataflow.retrieval.item_search.search_memories.

An item is identified by (namespace, subject, agent, kind, key); its key comes from its name
(item_fields.name_key: a snake_case name is its own key, any other name its ASCII words plus a hash), so a
name is unique per (subject, agent). Seed 003 types map onto the one kind enum (user -> fact, project ->
meta; the type is kept as given). Items that were extracted rather than written here read the same way
(their key is their name, their kind their type).

Semantics, the same on every surface:
- create: a new item in the (subject, agent) scope; MemoryConflict when an active item there already has the
  name (the message names it and says to update it instead). A deleted item of the same name and kind comes
  back as a new version of itself.
- update: explicit, by id; only the fields given change (a new name is a new key, checked like create, but
  only live items hold a name: a deleted item that had the new name gives it up); a new version each time
  (metadata too), nothing written when nothing changed (action unchanged).
- delete: versioned; the item becomes a deleted version and its history stays.
- Every write is source manual and goes through strataflow.memory.store (so extraction never silently
  overwrites it); the caller owns the transaction (the CLI uses engine.begin(), the service one per request).

Visibility: the one rule, the SQL function strataflow_item_visible (sql/250), used here and by every other
reader of memory_items through `visible_to_agent`: an item is visible to a viewer agent when it has no agent,
is shared, or is the viewer's; without an agent a request sees no agent's private items. Only the owning
agent changes or deletes an agent's item (MemoryForbidden for another agent's shared one; a request without an
agent may change only the namespace's items). Hot summaries (an internal kind) are not part of this API.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, text

from models.memory_items import MemoryItem, MemoryPage, MemoryVersion, MemoryWrite
from strataflow.config import Settings
from strataflow.memory import store
from strataflow.memory.item_fields import (
    checked_fields,
    checked_importance,
    checked_limit,
    content_of,
    decode_cursor,
    default_statement,
    encode_cursor,
    item_of,
    name_key,
    resolve_type,
    version_of,
)

MAX_LIST = 10_000


def visible_to_agent(alias: str = "mi", viewer: str = ":agent_id") -> str:
    """The one agent-visibility rule (sql/250_create_function_item_visible.sql) as a condition on the
    memory_items of `alias` for the viewer agent bound as `viewer` (null: a request without an agent)."""
    prefix = f"{alias}." if alias else ""
    return f"strataflow_item_visible({prefix}agent_id, {prefix}is_shared, cast({viewer} as text))"


# memory_items unaliased as a reader with no agent sees them (profiles, summaries, namespace-level stages).
NAMESPACE_VISIBLE = visible_to_agent("", "null")
ITEM_COLUMNS = """
    mi.item_id, mi.subject_id, mi.agent_id, mi.kind, mi.key, mi.value, mi.statement, mi.category,
    mi.importance, mi.confidence, mi.status, mi.source, mi.version, mi.valid_from, mi.recorded_at,
    mi.updated_at, mi.created_at, mi.source_message_ids, mi.metadata, mi.name, mi.description, mi.entry_type,
    mi.is_shared
"""
# What a request reads: its namespace, what its agent may see, no internal hot summary, nothing past its time
# to live (memory_items.expires_at: gone for every read at once, deleted later by the store's sweep).
READABLE = f"""
    mi.namespace = :namespace and {visible_to_agent()} and mi.kind <> 'hot_summary'
    and (:include_deleted or mi.status = 'active') and (mi.expires_at is null or mi.expires_at > now())
"""
SELECT_BY_ID = text(
    f"select {ITEM_COLUMNS} from memory_items as mi where mi.item_id = :item_id and {READABLE}"
)
SELECT_BY_KEY = text(
    f"""
    select {ITEM_COLUMNS} from memory_items as mi
    where mi.subject_id = :subject_id and mi.kind = :kind and mi.key = :key and {READABLE}
    order by mi.agent_id is not distinct from cast(:agent_id as text) desc, mi.agent_id nulls first,
        mi.status = 'active' desc, mi.item_id
    limit 1
    """
)
SELECT_BY_IDENTITY = text(
    f"""
    select {ITEM_COLUMNS} from memory_items as mi
    where mi.namespace = :namespace and mi.subject_id = :subject_id
        and mi.agent_id is not distinct from cast(:agent_id as text) and mi.kind = :kind and mi.key = :key
    """
)
SELECT_NAME_TAKEN = text(
    """
    select mi.item_id, mi.status from memory_items as mi
    where mi.namespace = :namespace and mi.subject_id = :subject_id
        and mi.agent_id is not distinct from cast(:agent_id as text) and mi.key = :key
        and mi.item_id <> :item_id and (mi.status = 'active' or mi.kind = :kind)
    order by mi.status = 'active' desc
    limit 1
    """
)
# A deleted item gives its key up to a live item renamed to it (its history keeps the key it had).
RELEASE_DELETED = text(
    """
    update memory_items set key = left(key, 80) || '_deleted_' || item_id
    where item_id = :item_id and namespace = :namespace and status = 'deleted'
    """
)
SELECT_PAGE = text(
    f"""
    select {ITEM_COLUMNS} from memory_items as mi
    where {READABLE}
        and (cast(:subject_id as text) is null or mi.subject_id = :subject_id)
        and (cast(:kind as text) is null or mi.kind = :kind)
        and (cast(:before as bigint) is null or mi.item_id < :before)
    order by mi.item_id desc
    limit :limit
    """
)
SELECT_HISTORY = text(
    """
    select version, action, kind, key, name, description, entry_type, value, statement, category, importance,
        confidence, agent_id, is_shared, status, source, valid_from, valid_to, recorded_at, superseded_at,
        run_id, model, note, metadata
    from memory_item_versions
    where item_id = :item_id and namespace = :namespace
    order by recorded_at, version_id
    """
)


class MemoryNotFound(LookupError):
    """No memory item with this id (or kind and key) is visible in the namespace to the request's agent."""


class MemoryConflict(Exception):
    """The name is taken in this (subject, agent) scope; the message names the item that holds it, whose id
    is `item_id`: update that item instead."""

    def __init__(self, message: str, item_id: int) -> None:
        super().__init__(message)
        self.item_id = item_id


class MemoryForbidden(PermissionError):
    """Another agent's (shared) item: readable, not changeable."""


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()  # update: a value not given stays as it is


def create_memory(
    conn: Connection,
    namespace: str,
    subject_id: str,
    type: str,
    name: str,
    value: Any,
    *,
    statement: str | None = None,
    description: str = "",
    agent_id: str | None = None,
    shared: bool = False,
    category: str | None = None,
    importance: int | None = None,
    confidence: float = 1.0,
    metadata: Mapping[str, Any] | None = None,
    settings: Settings | None = None,
    event_at: datetime | None = None,
) -> MemoryWrite:
    """Create an item in the (subject, agent) scope; MemoryConflict when its name is taken there.

    type: a seed 003 type or a kind. value: the content (any JSON value; a text value is also the statement
    unless `statement` is given, any other value reads `key words: value`). settings: embed the item in the
    same write (every surface passes them, so a saved item is found by meaning at once). event_at: when it
    became true (default now; an import gives the time its source recorded)."""
    kind, seed_type = resolve_type(type)
    key = name_key(name)
    statement = statement if statement is not None else default_statement(key, value)
    name, _, description = checked_fields(name, content_of(value, statement), description)
    checked_importance(importance)
    _require_free(conn, namespace, subject_id, agent_id, kind, key, name, item_id=0)
    current = _by_identity(conn, namespace, subject_id, agent_id, kind, key)
    action = store.upsert_item(
        conn, namespace=namespace, subject_id=subject_id, agent_id=agent_id, kind=kind, key=key, value=value,
        statement=statement, category=category, importance=importance, confidence=confidence,
        source="manual", event_at=event_at or write_time(current["valid_from"] if current else None),
        metadata=metadata, name=name, description=description, entry_type=seed_type, is_shared=shared,
        settings=settings,
    )  # fmt: skip
    row = _by_identity(conn, namespace, subject_id, agent_id, kind, key)
    assert row is not None
    return MemoryWrite(action=action, item=item_of(row))


def update_memory(
    conn: Connection,
    namespace: str,
    item_id: int,
    *,
    agent_id: str | None = None,
    type: str | None = None,
    name: str | None = None,
    description: str | None = None,
    value: Any = UNSET,
    statement: str | None = None,
    category: str | None = None,
    importance: int | None = None,
    confidence: float | None = None,
    shared: bool | None = None,
    metadata: Mapping[str, Any] | None = None,
    settings: Settings | None = None,
) -> MemoryWrite:
    """Change the given fields of a visible, active item (a new version; a new name is a new key):
    MemoryNotFound, MemoryForbidden for another agent's item, MemoryConflict when the new name is taken.
    A new value without a statement gets the default statement of the value; settings: embed a changed
    statement in the same write."""
    row = _changeable(conn, namespace, item_id, agent_id)
    kind, seed_type = resolve_type(type) if type is not None else (row["kind"], store.KEEP)
    new_value = row["value"] if value is UNSET else value
    key = name_key(name) if name is not None else row["key"]
    if statement is None:
        statement = default_statement(key, new_value) if value is not UNSET else row["statement"]
    new_name, _, new_description = checked_fields(
        name if name is not None else row["name"] or row["key"],
        content_of(new_value, statement),
        description if description is not None else row["description"] or "",
    )
    checked_importance(importance)
    if (kind, key) != (row["kind"], row["key"]):
        subject, agent = row["subject_id"], row["agent_id"]
        _require_free(conn, namespace, subject, agent, kind, key, new_name, item_id=item_id)
    action = store.upsert_item(
        conn, namespace=namespace, subject_id=row["subject_id"], agent_id=row["agent_id"], kind=kind, key=key,
        value=new_value, statement=statement or content_of(new_value, None),
        category=category if category is not None else row["category"],
        importance=importance if importance is not None else row["importance"],
        confidence=confidence if confidence is not None else row["confidence"], source="manual",
        event_at=write_time(row["valid_from"]), metadata=metadata, item_id=item_id,
        name=new_name if name is not None or row["name"] else store.KEEP,
        description=new_description if description is not None else store.KEEP,
        entry_type=seed_type, is_shared=shared if shared is not None else store.KEEP, settings=settings,
    )  # fmt: skip
    return MemoryWrite(action=action, item=get_memory(conn, namespace, item_id, agent_id=agent_id))


def delete_memory(
    conn: Connection, namespace: str, item_id: int, *, agent_id: str | None = None
) -> MemoryWrite:
    """Mark a visible, active item deleted (a new version; its history stays): MemoryNotFound,
    MemoryForbidden as update."""
    delete_row(conn, namespace, _changeable(conn, namespace, item_id, agent_id))
    item = get_memory(conn, namespace, item_id, agent_id=agent_id, include_deleted=True)
    return MemoryWrite(action="deleted", item=item)


def get_memory(
    conn: Connection,
    namespace: str,
    item_id: int,
    *,
    agent_id: str | None = None,
    include_deleted: bool = False,
) -> MemoryItem:
    """The item with this id, if the request's agent may see it; MemoryNotFound otherwise."""
    return item_of(_visible(conn, namespace, item_id, agent_id, include_deleted))


def find_memory(
    conn: Connection,
    namespace: str,
    subject_id: str,
    type: str,
    key: str,
    *,
    agent_id: str | None = None,
    include_deleted: bool = False,
) -> MemoryItem:
    """The subject's item of this type (or kind) and key that the agent sees, its own first, then the
    namespace's, then a shared one; MemoryNotFound when there is none."""
    kind = resolve_type(type)[0]
    params = {
        "namespace": namespace, "subject_id": subject_id, "agent_id": agent_id, "kind": kind, "key": key,
        "include_deleted": include_deleted,
    }  # fmt: skip
    row = conn.execute(SELECT_BY_KEY, params).mappings().first()
    if row is None:
        state = "" if include_deleted else "active "
        raise MemoryNotFound(
            f"no {state}memory item {kind}:{key} for subject {subject_id!r} in namespace {namespace!r}"
            + (f" visible to agent {agent_id!r}" if agent_id else "")
        )
    return item_of(row)


def list_memories(
    conn: Connection,
    namespace: str,
    subject_id: str | None = None,
    *,
    agent_id: str | None = None,
    type: str | None = None,
    include_deleted: bool = False,
    limit: int = 50,
    cursor: str | None = None,
) -> MemoryPage:
    """The items the agent sees (of one subject, or all), newest first, a page at a time: pass next_cursor
    back as cursor for the next page."""
    checked_limit(limit, MAX_LIST)
    params = {
        "namespace": namespace, "subject_id": subject_id, "agent_id": agent_id,
        "kind": resolve_type(type)[0] if type else None, "include_deleted": include_deleted,
        "before": decode_cursor(cursor), "limit": limit + 1,
    }  # fmt: skip
    rows = conn.execute(SELECT_PAGE, params).mappings().all()
    items = [item_of(row) for row in rows[:limit]]
    return MemoryPage(entries=items, next_cursor=encode_cursor(items[-1].id) if len(rows) > limit else None)


def memory_history(
    conn: Connection,
    namespace: str,
    item_id: int,
    *,
    agent_id: str | None = None,
    include_deleted: bool = True,
) -> list[MemoryVersion]:
    """Every version of a visible item (a deleted one's too, unless include_deleted=False, as over HTTP),
    oldest first, with event and record times and the versions kept only in history with their note."""
    _visible(conn, namespace, item_id, agent_id, include_deleted)
    params = {"item_id": item_id, "namespace": namespace}
    return [version_of(row) for row in conn.execute(SELECT_HISTORY, params).mappings()]


def delete_row(conn: Connection, namespace: str, row: Mapping[Any, Any]) -> None:
    """The versioned delete of an active item's row (its identity and valid_from), as a manual write."""
    store.delete_item(
        conn, namespace=namespace, subject_id=row["subject_id"], agent_id=row["agent_id"], kind=row["kind"],
        key=row["key"], event_at=write_time(row["valid_from"]), source="manual",
    )  # fmt: skip


def write_time(current_valid_from: datetime | None) -> datetime:
    """Now, or just after the current version's event time if that is later: a manual write always becomes
    current."""
    now = datetime.now(UTC)
    if current_valid_from is None or current_valid_from < now:
        return now
    return current_valid_from + timedelta(microseconds=1)


def _require_free(
    conn: Connection,
    namespace: str,
    subject_id: str,
    agent_id: str | None,
    kind: str,
    key: str,
    name: str,
    item_id: int,
) -> None:
    params = {
        "namespace": namespace, "subject_id": subject_id, "agent_id": agent_id, "key": key, "kind": kind,
        "item_id": item_id,
    }  # fmt: skip
    taken = conn.execute(SELECT_NAME_TAKEN, params).first()
    if taken is None or (taken.status == "deleted" and item_id == 0):
        return  # a deleted item of this name and kind comes back as a new version of itself
    if taken.status == "deleted":  # an update: names are unique among live items only
        conn.execute(RELEASE_DELETED, {"item_id": taken.item_id, "namespace": namespace})
        return
    scope = f"subject {subject_id!r}" + (f", agent {agent_id!r}" if agent_id else "")
    raise MemoryConflict(
        f"memory item {taken.item_id} already has the name {name!r} for {scope}; update that item instead",
        int(taken.item_id),
    )


def _visible(
    conn: Connection, namespace: str, item_id: int, agent_id: str | None, include_deleted: bool
) -> Mapping[Any, Any]:
    params = {
        "namespace": namespace, "item_id": item_id, "agent_id": agent_id, "include_deleted": include_deleted,
    }  # fmt: skip
    row = conn.execute(SELECT_BY_ID, params).mappings().first()
    if row is None:
        raise MemoryNotFound(
            f"no {'' if include_deleted else 'active '}memory item {item_id} in namespace {namespace!r}"
            + (f" visible to agent {agent_id!r}" if agent_id else "")
        )
    return row


def _changeable(conn: Connection, namespace: str, item_id: int, agent_id: str | None) -> Mapping[Any, Any]:
    row = _visible(conn, namespace, item_id, agent_id, False)
    if row["agent_id"] not in (None, agent_id):
        raise MemoryForbidden(
            f"memory item {item_id} belongs to agent {row['agent_id']!r}: other agents may read a shared "
            "item but not change or delete it"
        )
    return row


def _by_identity(
    conn: Connection, namespace: str, subject_id: str, agent_id: str | None, kind: str, key: str
) -> Mapping[Any, Any] | None:
    """The one item (active or deleted) with this identity."""
    params = {
        "namespace": namespace, "subject_id": subject_id, "agent_id": agent_id, "kind": kind, "key": key,
    }  # fmt: skip
    return conn.execute(SELECT_BY_IDENTITY, params).mappings().first()
