"""Operations of the one L2 API (strataflow.memory.api) over sets of items rather than one: what the
mem0-compatible API and the LangGraph store need beside create/update/delete/get/find/list/history. Same row
type, same visibility rule (api.READABLE: the viewer agent's items, the namespace's and shared ones), same
versioned delete (api.delete_row).

- `items_from_messages`: the active items whose lineage includes some of the given L1 messages (what an
  extraction made of them).
- `item_conversations`: the conversation of each item: `metadata.conversation_id` of an item written with one,
  else the one conversation of the L1 messages it came from (message_keys keeps it after L1 expiry).
- `entity_counts`: the users (subjects), agents and conversations that have active items, with counts.
- `metadata_values`: the distinct values at one path of the metadata of the visible active items.
- `every_memory`: the visible active items of a subject (or the namespace), newest first, every page of
  api.list_memories up to a bound.
- `delete_memories`: a versioned delete of every active item of a subject / agent / conversation / app that
  the request may change: the viewer's own and the namespace's, or, for a caller that may write the whole
  namespace (`every_agent`), every agent's too.

The caller owns the transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

from models.memory_items import MemoryItem
from strataflow.memory.api import ITEM_COLUMNS, READABLE, delete_row, list_memories
from strataflow.memory.item_fields import item_of

MAX_LISTED = 10_000  # every_memory's default bound: a whole-scope read stays a bounded one
CONVERSATION_KEY = "conversation_id"  # metadata field of an item written for one conversation (mem0 run_id)
APP_KEY = "app_id"  # metadata field of an item written for one mem0 app
SELECT_FROM_MESSAGES = text(
    f"""
    select {ITEM_COLUMNS} from memory_items as mi
    where {READABLE} and mi.subject_id = :subject_id
        and mi.source_message_ids && cast(:message_ids as bigint[])
    order by mi.item_id
    """
)
SELECT_LINEAGE_CONVERSATIONS = text(
    """
    select k.message_id, k.conversation_id from message_keys as k
    where k.message_id = any(cast(:message_ids as bigint[])) and k.namespace = :namespace
    """
)
SELECT_ENTITIES = text(
    f"""
    select entity_type, name, count(*) as total, min(created_at) as created_at, max(updated_at) as updated_at
    from (
        select 'user' as entity_type, mi.subject_id as name, mi.created_at, mi.updated_at
        from memory_items as mi where {READABLE}
        union all
        select 'agent', mi.agent_id, mi.created_at, mi.updated_at
        from memory_items as mi where {READABLE} and mi.agent_id is not null
        union all
        select 'run', mi.metadata ->> '{CONVERSATION_KEY}', mi.created_at, mi.updated_at
        from memory_items as mi where {READABLE} and mi.metadata ? '{CONVERSATION_KEY}'
        union all
        select 'app', mi.metadata ->> '{APP_KEY}', mi.created_at, mi.updated_at
        from memory_items as mi where {READABLE} and mi.metadata ? '{APP_KEY}'
    ) as e
    group by entity_type, name
    order by entity_type, name
    """
)
SELECT_METADATA_VALUES = text(
    f"""
    select distinct mi.metadata #> cast(:path as text[]) as value from memory_items as mi
    where {READABLE} and mi.metadata #> cast(:path as text[]) is not null
        and (cast(:subject_id as text) is null or mi.subject_id = :subject_id)
    """
)
SELECT_DELETABLE = text(
    f"""
    select mi.item_id, mi.subject_id, mi.agent_id, mi.kind, mi.key, mi.valid_from from memory_items as mi
    where mi.namespace = :namespace and mi.status = 'active' and mi.kind <> 'hot_summary'
        and (:every_agent or mi.agent_id is null or mi.agent_id = cast(:viewer as text))
        and (cast(:subject_id as text) is null or mi.subject_id = :subject_id)
        and (cast(:owner as text) is null or mi.agent_id = :owner)
        and (cast(:app_id as text) is null or mi.metadata ->> '{APP_KEY}' = :app_id)
        and (cast(:conversation_id as text) is null or mi.metadata ->> '{CONVERSATION_KEY}' = :conversation_id
             or exists (select 1 from message_keys as k
                        where k.message_id = any(mi.source_message_ids) and k.namespace = mi.namespace
                            and k.conversation_id = :conversation_id))
    order by mi.item_id
    for update
    """
)


@dataclass(frozen=True)
class EntityCount:
    """A user (subject), agent or run (conversation) with active items, and how many."""

    type: str  # user, agent or run
    name: str
    total: int
    created_at: datetime
    updated_at: datetime


def items_from_messages(
    conn: Connection, namespace: str, subject_id: str, message_ids: Sequence[int], *, agent_id: str | None
) -> list[MemoryItem]:
    """The subject's active items, visible to the agent, whose lineage includes one of message_ids."""
    params = {
        "namespace": namespace, "subject_id": subject_id, "message_ids": list(message_ids),
        "agent_id": agent_id, "include_deleted": False,
    }  # fmt: skip
    return [item_of(row) for row in conn.execute(SELECT_FROM_MESSAGES, params).mappings()]


def item_conversations(
    conn: Connection, namespace: str, items: Iterable[MemoryItem]
) -> dict[int, str | None]:
    """item id -> its conversation (module docstring); None when it has none or its messages span several."""
    found: dict[int, str | None] = {}
    lineage: dict[int, list[int]] = {}
    for item in items:
        given = item.metadata.get(CONVERSATION_KEY)
        if isinstance(given, str):
            found[item.id] = given
        else:
            found[item.id] = None
            lineage[item.id] = item.source_message_ids
    wanted = sorted({i for ids in lineage.values() for i in ids})
    if wanted:
        rows = conn.execute(SELECT_LINEAGE_CONVERSATIONS, {"message_ids": wanted, "namespace": namespace})
        of_message = {int(row.message_id): str(row.conversation_id) for row in rows}
        for item_id, ids in lineage.items():
            conversations = {of_message[i] for i in ids if i in of_message}
            found[item_id] = conversations.pop() if len(conversations) == 1 else None
    return found


def entity_counts(conn: Connection, namespace: str, *, agent_id: str | None) -> list[EntityCount]:
    """Users, agents and runs with active items the agent sees, by type and name."""
    params = {"namespace": namespace, "agent_id": agent_id, "include_deleted": False}
    return [
        EntityCount(row.entity_type, row.name, int(row.total), row.created_at, row.updated_at)
        for row in conn.execute(SELECT_ENTITIES, params)
    ]


def metadata_values(
    conn: Connection,
    namespace: str,
    path: Sequence[str],
    *,
    subject_id: str | None = None,
    agent_id: str | None,
) -> list[Any]:
    """The distinct values at `path` of the metadata of the active items the agent sees (of one subject)."""
    params = {
        "namespace": namespace, "path": list(path), "subject_id": subject_id, "agent_id": agent_id,
        "include_deleted": False,
    }  # fmt: skip
    return [row.value for row in conn.execute(SELECT_METADATA_VALUES, params)]


def every_memory(
    conn: Connection,
    namespace: str,
    subject_id: str | None,
    *,
    agent_id: str | None,
    at_most: int = MAX_LISTED,
) -> list[MemoryItem]:
    """The active items the agent sees (of one subject, or all), newest first, a page of list_memories at a
    time until there are no more or at least at_most have been read."""
    found: list[MemoryItem] = []
    cursor: str | None = None
    while len(found) < at_most:
        page = list_memories(conn, namespace, subject_id, agent_id=agent_id, limit=1000, cursor=cursor)
        found.extend(page.entries)
        if (cursor := page.next_cursor) is None:
            break
    return found


def delete_memories(
    conn: Connection,
    namespace: str,
    *,
    viewer: str | None,
    subject_id: str | None = None,
    owner: str | None = None,
    conversation_id: str | None = None,
    app_id: str | None = None,
    every_agent: bool = False,
) -> list[int]:
    """Delete (versioned, like api.delete_memory) every active item of the subject / owning agent /
    conversation given that the viewer may change: the namespace's and the viewer's own, or every agent's
    with every_agent (the caller checks that the request may write the whole namespace). Returns their ids."""
    params = {
        "namespace": namespace, "viewer": viewer, "subject_id": subject_id, "owner": owner,
        "conversation_id": conversation_id, "app_id": app_id, "every_agent": every_agent,
    }  # fmt: skip
    deleted = []
    for row in conn.execute(SELECT_DELETABLE, params).mappings().all():
        delete_row(conn, namespace, row)
        deleted.append(int(row["item_id"]))
    return deleted


# An item with a time to live keeps {"ttl": minutes, "expires_at": epoch seconds} at a metadata path (the
# LangGraph store's `langgraph`): reads treat it as gone once expires_at has passed, a read may restart it,
# and `delete_expired` is the sweep.
REFRESH_EXPIRY = text(
    """
    update memory_items set metadata = jsonb_set(metadata, cast(:path as text[]) || array['expires_at'],
        to_jsonb(extract(epoch from now())
            + cast(metadata #>> (cast(:path as text[]) || array['ttl']) as float) * 60))
    where namespace = :namespace and item_id = any(cast(:item_ids as bigint[])) and status = 'active'
        and jsonb_typeof(metadata #> (cast(:path as text[]) || array['ttl'])) = 'number'
    """
)
SELECT_EXPIRED = text(
    """
    select mi.item_id, mi.subject_id, mi.agent_id, mi.kind, mi.key, mi.valid_from from memory_items as mi
    where mi.namespace = :namespace and mi.status = 'active'
        and mi.agent_id is not distinct from cast(:agent_id as text)
        and jsonb_typeof(mi.metadata #> (cast(:path as text[]) || array['expires_at'])) = 'number'
        and cast(mi.metadata #>> (cast(:path as text[]) || array['expires_at']) as float)
            < extract(epoch from now())
    order by mi.item_id
    limit :limit
    for update skip locked
    """
)


def refresh_expiry(conn: Connection, namespace: str, item_ids: Sequence[int], path: Sequence[str]) -> None:
    """Restart the time to live of these items (those that have one): expires_at = now + ttl minutes."""
    if item_ids:
        params = {"namespace": namespace, "item_ids": list(item_ids), "path": list(path)}
        conn.execute(REFRESH_EXPIRY, params)


def delete_expired(
    conn: Connection, namespace: str, path: Sequence[str], *, agent_id: str | None, limit: int = 100
) -> list[int]:
    """The sweep: a versioned delete of up to `limit` of the agent's items whose time to live has passed."""
    params = {"namespace": namespace, "path": list(path), "agent_id": agent_id, "limit": limit}
    deleted = []
    for row in conn.execute(SELECT_EXPIRED, params).mappings().all():
        delete_row(conn, namespace, row)
        deleted.append(int(row["item_id"]))
    return deleted


SELECT_BY_METADATA = text(
    """
    select mi.item_id from memory_items as mi
    where mi.namespace = :namespace and mi.subject_id = :subject_id
        and mi.agent_id is not distinct from cast(:agent_id as text) and mi.status = 'active'
        and mi.metadata #>> cast(:path as text[]) = :value
    order by mi.item_id
    limit 1
    """
)


def item_with_metadata(
    conn: Connection,
    namespace: str,
    subject_id: str,
    path: Sequence[str],
    value: str,
    *,
    agent_id: str | None,
) -> int | None:
    """The id of the subject's active item in the agent's own scope whose metadata has `value` at `path`
    (e.g. the entry an import made of a source's memory id), or None."""
    params = {
        "namespace": namespace, "subject_id": subject_id, "agent_id": agent_id, "path": list(path),
        "value": value,
    }  # fmt: skip
    found = conn.execute(SELECT_BY_METADATA, params).scalar()
    return None if found is None else int(found)


def filtered_page(
    conn: Connection, namespace: str, condition: str, params: Mapping[str, Any], *, limit: int, offset: int
) -> tuple[list[MemoryItem], int]:
    """A page of the namespace's active items (no hot summary) that meet `condition` (SQL over
    memory_items `mi`, e.g. strataflow.memory.adapters.filter_sql), newest first, and how many meet it in
    all: counted and paged in SQL."""
    query = text(
        f"""
        select {ITEM_COLUMNS}, count(*) over () as total from memory_items as mi
        where mi.namespace = :namespace and mi.status = 'active' and mi.kind <> 'hot_summary' and {condition}
        order by mi.item_id desc
        limit :limit offset :offset
        """
    )
    rows = conn.execute(
        query, {**params, "namespace": namespace, "limit": limit, "offset": offset}
    ).mappings()
    found = [dict(row) for row in rows]
    total = int(found[0]["total"]) if found else 0
    if not found and offset:
        count = text(
            f"""select count(*) from memory_items as mi where mi.namespace = :namespace
            and mi.status = 'active' and mi.kind <> 'hot_summary' and {condition}"""
        )
        total = int(conn.execute(count, {**params, "namespace": namespace}).scalar_one())
    return [item_of(row) for row in found], total


SELECT_MESSAGE_METADATA = text(
    """
    select m.message_id, m.metadata from conversation_messages as m
    where m.namespace = :namespace and m.message_id = any(cast(:message_ids as bigint[]))
    order by m.message_id
    """
)


def message_metadata(
    conn: Connection, namespace: str, items: Iterable[MemoryItem]
) -> dict[int, dict[str, Any]]:
    """item id -> the metadata of the L1 messages an extracted item came from (merged in message order),
    for extracted items whose messages are still in L1 (an add's metadata and app travel with them)."""
    lineage = {item.id: item.source_message_ids for item in items if item.source == "extracted"}
    wanted = sorted({i for ids in lineage.values() for i in ids})
    if not wanted:
        return {}
    rows = conn.execute(SELECT_MESSAGE_METADATA, {"namespace": namespace, "message_ids": wanted})
    of_message = {int(row.message_id): dict(row.metadata or {}) for row in rows}
    found: dict[int, dict[str, Any]] = {}
    for item_id, ids in lineage.items():
        merged: dict[str, Any] = {}
        for message_id in sorted(ids):
            merged.update(of_message.get(message_id, {}))
        if merged:
            found[item_id] = merged
    return found
