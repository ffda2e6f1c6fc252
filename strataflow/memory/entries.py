"""Seed 003 memory entries (the NetaClaw memory provider): save, get, update, delete, list, search and history
of named entries of an agent and a user, over L2 memory items.

An entry is a memory item with a ``name`` (any language, e.g. 用户偏好-简洁风格), a ``description`` (one line:
when it is relevant) and ``content``; its ``type`` is the seed's (user, project, feedback, reference), kept as
given beside the internal kind (user -> fact, project -> meta), or any kind of the one enum. Items that were
extracted rather than saved read as entries too (their key is the name, their kind the type). The fields
themselves (limits, the key of a name, the kind of a type, the list cursor, an item read as an Entry) are in
strataflow.memory.entry_fields; this module holds the scoped reads and writes.

- Key: derived from the name (entry_fields.entry_key), stable and unique per scope, so two different names
  never share a key.
- Scope: (namespace, subject, agent). An entry saved with an agent is private to that agent unless shared;
  a request with an agent sees its own entries, shared ones and the namespace's (no agent); a request without
  one sees no agent's private entries (the API key's role decides the namespace). Names are unique per scope:
  saving a name that exists raises EntryConflict (update it instead, as the seed asks). Only the owning agent
  may change or delete an agent's entry (EntryForbidden), a viewer without an agent included.
- Update can change type, name (and so the key), description, content and sharing; each change is a new
  version in memory_item_versions (strataflow.memory.store), like every manual write.
- Search ranks with strataflow.retrieval.search (hybrid BM25 + dense) restricted to the agent's view when
  that function takes ``agent_id``; otherwise the full-text search of strataflow.memory.api (no embedding
  needed either way, so an entry saved a second ago is found).

The caller owns the transaction; every function takes the namespace the caller may use.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, text

from models.entries import Entry, EntryPage, EntryVersion
from strataflow.memory import store
from strataflow.memory.api import (
    AGENT_VISIBLE,
    ITEM_COLUMNS,
    MemoryItem,
    get_item_by_identity,
    write_time,
)
from strataflow.memory.entry_fields import (
    EntryFieldError,
    checked_fields,
    decode_cursor,
    encode_cursor,
    entry_content,
    entry_key,
    entry_of,
    resolve_type,
)

SELECT_ENTRY = text(
    f"""
    select {ITEM_COLUMNS} from memory_items as mi
    where mi.item_id = :item_id and mi.namespace = :namespace and {AGENT_VISIBLE}
        and (:include_deleted or mi.status = 'active') and mi.kind <> 'hot_summary'
    """
)
SELECT_ENTRIES = text(
    f"""
    select {ITEM_COLUMNS} from memory_items as mi
    where mi.namespace = :namespace and mi.item_id = any(:ids) and {AGENT_VISIBLE}
        and mi.status = 'active' and mi.kind <> 'hot_summary'
    """
)
SELECT_NAME_TAKEN = text(
    """
    select mi.item_id, mi.status from memory_items as mi
    where mi.namespace = :namespace and mi.subject_id = :subject_id
        and mi.agent_id is not distinct from :agent_id and mi.key = :key and mi.item_id <> :item_id
        and (mi.status = 'active' or mi.kind = :kind)
    order by mi.status = 'active' desc
    limit 1
    """
)
SELECT_PAGE = text(
    f"""
    select {ITEM_COLUMNS} from memory_items as mi
    where mi.namespace = :namespace and {AGENT_VISIBLE}
        and (cast(:subject_id as text) is null or mi.subject_id = :subject_id)
        and (cast(:kind as text) is null or mi.kind = :kind)
        and (cast(:before as bigint) is null or mi.item_id < :before)
        and mi.status = 'active' and mi.kind <> 'hot_summary'
    order by mi.item_id desc
    limit :limit
    """
)
SELECT_HISTORY = text(
    """
    select version, action, kind, key, name, description, entry_type, value, statement, status, source,
        valid_from, valid_to, recorded_at, superseded_at, note
    from memory_item_versions
    where item_id = :item_id
    order by recorded_at, version_id
    """
)


class EntryNotFound(LookupError):
    """No entry with this id is visible in the namespace (and to the agent, when one is given)."""


class EntryConflict(Exception):
    """The name is taken in this scope; the message names the entry that holds it."""


class EntryForbidden(PermissionError):
    """Another agent's (shared) entry: readable, not changeable."""


def save_entry(
    conn: Connection,
    namespace: str,
    subject_id: str,
    entry_type: str,
    name: str,
    content: str,
    description: str = "",
    *,
    agent_id: str | None = None,
    shared: bool = False,
    metadata: dict[str, Any] | None = None,
) -> Entry:
    """Create an entry in the (subject, agent) scope; EntryConflict when its name is taken there."""
    kind, seed_type = resolve_type(entry_type)
    name, content, description = checked_fields(name, content, description)
    key = entry_key(name)
    _require_free(conn, namespace, subject_id, agent_id, kind, key, name, item_id=0)
    store.upsert_item(
        conn, namespace=namespace, subject_id=subject_id, agent_id=agent_id, kind=kind, key=key,
        value=content, statement=content, source="manual", event_at=write_time(None), metadata=metadata,
        name=name, description=description, entry_type=seed_type, is_shared=shared,
    )  # fmt: skip
    return _by_identity(conn, namespace, subject_id, agent_id, kind, key)


def get_entry(
    conn: Connection,
    namespace: str,
    item_id: int,
    *,
    agent_id: str | None = None,
    include_deleted: bool = False,
) -> Entry:
    """The entry, if the agent (or, without one, the namespace) can see it; EntryNotFound otherwise."""
    return entry_of(_visible(conn, namespace, item_id, agent_id, include_deleted))


def update_entry(
    conn: Connection,
    namespace: str,
    item_id: int,
    *,
    agent_id: str | None = None,
    entry_type: str | None = None,
    name: str | None = None,
    description: str | None = None,
    content: str | None = None,
    shared: bool | None = None,
    metadata: dict[str, Any] | None = None,
) -> Entry:
    """Change the given fields (a new version; a new name is a new key); EntryConflict when the new name is
    taken, EntryForbidden for another agent's entry."""
    item = _changeable(conn, namespace, item_id, agent_id)
    kind, seed_type = resolve_type(entry_type) if entry_type is not None else (item.kind, store.KEEP)
    new_name, new_content, new_description = checked_fields(
        name if name is not None else item.name or item.key,
        content if content is not None else entry_content(item.value, item.statement),
        description if description is not None else item.description or "",
    )
    key = entry_key(new_name) if name is not None else item.key
    if (kind, key) != (item.kind, item.key):
        _require_free(conn, namespace, item.subject_id, item.agent_id, kind, key, new_name, item_id=item_id)
    store.upsert_item(
        conn, namespace=namespace, subject_id=item.subject_id, agent_id=item.agent_id, kind=kind, key=key,
        value=new_content if content is not None else item.value,
        statement=new_content if content is not None else item.statement or new_content,
        category=item.category, importance=item.importance, confidence=item.confidence, source="manual",
        event_at=write_time(item), metadata=metadata, item_id=item_id,
        name=new_name if name is not None or item.name else store.KEEP,
        description=new_description if description is not None else store.KEEP,
        entry_type=seed_type, is_shared=shared if shared is not None else store.KEEP,
    )  # fmt: skip
    return entry_of(_visible(conn, namespace, item_id, agent_id, False))


def delete_entry(conn: Connection, namespace: str, item_id: int, *, agent_id: str | None = None) -> Entry:
    """Mark the entry deleted (a new version; history stays); EntryNotFound, EntryForbidden as update."""
    item = _changeable(conn, namespace, item_id, agent_id)
    store.delete_item(
        conn, namespace=namespace, subject_id=item.subject_id, agent_id=item.agent_id, kind=item.kind,
        key=item.key, event_at=write_time(item), source="manual",
    )  # fmt: skip
    return entry_of(_visible(conn, namespace, item_id, agent_id, True))


def list_entries(
    conn: Connection,
    namespace: str,
    subject_id: str | None = None,
    *,
    agent_id: str | None = None,
    entry_type: str | None = None,
    limit: int = 50,
    cursor: str | None = None,
) -> EntryPage:
    """Active entries, newest first, a page at a time: pass next_cursor back for the next page."""
    if not 1 <= limit <= 500:
        raise EntryFieldError("limit", f"limit must be between 1 and 500, got {limit}")
    kind = resolve_type(entry_type)[0] if entry_type else None
    params = {
        "namespace": namespace, "subject_id": subject_id, "agent_id": agent_id, "kind": kind,
        "before": decode_cursor(cursor), "limit": limit + 1,
    }  # fmt: skip
    items = [MemoryItem(**row) for row in conn.execute(SELECT_PAGE, params).mappings()]
    more = len(items) > limit
    entries = [entry_of(item) for item in items[:limit]]
    return EntryPage(entries=entries, next_cursor=encode_cursor(entries[-1].id) if more else None)


def entry_history(
    conn: Connection, namespace: str, item_id: int, *, agent_id: str | None = None
) -> list[EntryVersion]:
    """Every version of a visible entry (deleted ones too), oldest first."""
    _visible(conn, namespace, item_id, agent_id, True)
    return [
        EntryVersion(
            version=row.version,
            action=row.action,
            type=row.entry_type or row.kind,
            kind=row.kind,
            key=row.key,
            name=row.name or row.key,
            description=row.description or "",
            content=entry_content(row.value, row.statement),
            status=row.status,
            source=row.source,
            valid_from=row.valid_from,
            valid_to=row.valid_to,
            recorded_at=row.recorded_at,
            superseded_at=row.superseded_at,
            note=row.note,
        )  # fmt: skip
        for row in conn.execute(SELECT_HISTORY, {"item_id": item_id})
    ]


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
        return  # a deleted entry of this name and kind comes back as a new version of itself
    scope = f"subject {subject_id!r}" + (f", agent {agent_id!r}" if agent_id else "")
    held = "a deleted entry" if taken.status == "deleted" else "entry"
    raise EntryConflict(
        f"{held} {taken.item_id} already has the name {name!r} for {scope}; update that entry instead"
    )


def _visible(
    conn: Connection, namespace: str, item_id: int, agent_id: str | None, include_deleted: bool
) -> MemoryItem:
    params = {
        "namespace": namespace,
        "item_id": item_id,
        "agent_id": agent_id,
        "include_deleted": include_deleted,
    }
    row = conn.execute(SELECT_ENTRY, params).mappings().first()
    if row is None:
        raise EntryNotFound(f"no memory entry {item_id} in namespace {namespace!r}")
    return MemoryItem(**row)


def _changeable(conn: Connection, namespace: str, item_id: int, agent_id: str | None) -> MemoryItem:
    item = _visible(conn, namespace, item_id, agent_id, False)
    if item.agent_id is not None and item.agent_id != agent_id:
        raise EntryForbidden(
            f"memory entry {item_id} belongs to agent {item.agent_id!r}: other agents may read a shared "
            "entry but not change or delete it"
        )
    return item


def _by_identity(
    conn: Connection, namespace: str, subject_id: str, agent_id: str | None, kind: str, key: str
) -> Entry:
    item = get_item_by_identity(conn, namespace, subject_id, agent_id, kind, key)
    assert item is not None
    return entry_of(item)
