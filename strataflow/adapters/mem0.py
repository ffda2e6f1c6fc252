"""mem0's memories as strataflow memory items, and the operations of the mem0-compatible API
(strataflow.service.routes.mem0; docs/integrations.md, "What is mapped").

Mapping: user_id -> the subject (a memory with no user belongs to its agent or run alone: its subject is
mem0_filters.entity_subject, which no user id can name), agent_id -> the item's agent, run_id ->
`metadata.conversation_id` of a memory added with one (an extracted memory: the conversation of its
messages, mem0_filters.RUN_SQL), app_id -> `metadata.app_id`, memory -> the content. A memory added with
infer=False is an entry of type `user` named by its text (`mem0_entry_name`), so the same text added twice
for a user and agent is one memory; with infer=True its messages go to L1 (source `mem0`, keys
"<event id>:<n>") and the extract stage makes the memories.

Who reads and changes what: `viewer` is the agent a request acts as (None: the namespace's memories and
shared ones); a filter may also make the private memories of the agents it names visible (the caller has
checked that the request may act as each). A memory added with an agent and a user is that agent's private
entry; one of an agent alone (no user) is the agent's shared entry: what the agent knows, readable by the
namespace, changed only by the agent.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, text

from models.memory_items import Explain, MemoryItem, MemoryVersion
from strataflow.adapters.conditions import Bound
from strataflow.adapters.mem0_filters import (
    APP_KEY,
    CONVERSATION_KEY,
    META_SQL,
    RUN_SQL,
    SOURCE,
    USER_SQL,
    Mem0Filter,
    entity_subject,
)
from strataflow.adapters.mem0_names import app_of, mem0_entry_name, mem0_metadata, mem0_text
from strataflow.config import Settings
from strataflow.ingest.message_progress import MessageProgress, message_progress
from strataflow.ingest.online import OnlineWrite, write_messages
from strataflow.memory import api, item_embedding
from strataflow.memory.item_fields import item_of
from strataflow.retrieval.item_search import search_memories
from strataflow.retrieval.layer_sql import ItemFilter

ENTRY_TYPE = "user"  # the seed 003 type of a memory added with infer=False (kind fact)
MAX_EVENT_MESSAGES = 100  # messages of one infer=True add (its event's messages are found by position)
RECORD_COLUMNS = f"""{api.ITEM_COLUMNS}, {USER_SQL.format(a="mi")} as mem0_user,
    {RUN_SQL.format(a="mi")} as mem0_run, {META_SQL.format(a="mi")} as mem0_metadata"""
LIVE = (
    "mi.status = 'active' and mi.kind <> 'hot_summary' and (mi.expires_at is null or mi.expires_at > now())"
)
# Visible to the viewer, or one of the agents a filter names; changeable: no others' shared memories.
VISIBLE = f"({api.visible_to_agent()} or mi.agent_id = any(cast(:also as text[])))"
CHANGEABLE = (
    "(mi.agent_id is null or mi.agent_id = cast(:agent_id as text) "
    "or mi.agent_id = any(cast(:also as text[])))"
)
SELECT_RECORDS = text(
    f"select {RECORD_COLUMNS} from memory_items as mi "
    "where mi.namespace = :namespace and mi.item_id = any(:ids)"
)

SELECT_ENTITIES = text(
    f"""
    select entity_type, name, count(*) as total, min(created_at) as created_at, max(updated_at) as updated_at
    from (
        select 'user' as entity_type, mi.subject_id as name, mi.created_at, mi.updated_at
        from memory_items as mi where {api.READABLE}
        union all
        select 'agent', mi.agent_id, mi.created_at, mi.updated_at
        from memory_items as mi where {api.READABLE} and mi.agent_id is not null
        union all
        select 'run', mi.metadata ->> '{CONVERSATION_KEY}', mi.created_at, mi.updated_at
        from memory_items as mi where {api.READABLE} and mi.metadata ? '{CONVERSATION_KEY}'
        union all
        select 'app', mi.metadata ->> '{APP_KEY}', mi.created_at, mi.updated_at
        from memory_items as mi where {api.READABLE} and mi.metadata ? '{APP_KEY}'
    ) as e
    group by entity_type, name
    order by entity_type, name
    """
)
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


@dataclass(frozen=True)
class EntityCount:
    """A user (subject), agent or run (conversation) with active items, and how many."""

    type: str  # user, agent or run
    name: str
    total: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class Mem0Record:
    """A memory as mem0 shows it: the item, its user (None for an entity's own), run, metadata (its own
    over its add's, entity ids included) and, from a search, its score."""

    item: MemoryItem
    user_id: str | None
    run_id: str | None
    metadata: dict[str, Any]
    score: float | None = None
    explain: Explain | None = None  # why a search found it (only when asked)

    @property
    def app_id(self) -> str | None:
        return app_of(self.metadata)

    @property
    def text(self) -> str:
        return mem0_text(self.item.content, self.item.statement, self.item.source)


@dataclass(frozen=True)
class AddScope:
    """Whom an add's memories belong to (at least one of user, agent, run) and its metadata."""

    user_id: str | None
    agent_id: str | None
    run_id: str | None
    app_id: str | None
    metadata: Mapping[str, Any] | None


@dataclass(frozen=True)
class Added:
    """One infer=False message stored: its memory and whether it is new (ADD) or had that text (NONE)."""

    record: Mem0Record
    event: str


@dataclass(frozen=True)
class Event:
    """An infer=True add: its messages, whether extraction has read them all, the memories made of them."""

    event_id: str
    messages: list[MessageProgress]
    done: bool
    made: list[Mem0Record]


# ------------------------------------------------------------------------------------------------- reads
def records(conn: Connection, namespace: str, item_ids: Sequence[int]) -> list[Mem0Record]:
    """The memories of these ids, in this order (ids the caller has already found visible)."""
    rows = {
        row["item_id"]: row
        for row in conn.execute(SELECT_RECORDS, {"namespace": namespace, "ids": list(item_ids)}).mappings()
    }
    return [_record(rows[i]) for i in dict.fromkeys(item_ids) if i in rows]


def _record(row: Mapping[Any, Any], score: float | None = None) -> Mem0Record:
    return Mem0Record(
        item_of(row), row["mem0_user"], row["mem0_run"], dict(row["mem0_metadata"] or {}), score
    )


def search(
    conn: Connection,
    settings: Settings,
    namespace: str,
    query: str,
    wanted: Mem0Filter,
    *,
    viewer: str | None,
    top_k: int,
    threshold: float | None = None,
    explain: bool = False,
) -> list[Mem0Record]:
    """The top_k memories that best match the query (the one ranking) among those the filter keeps, best
    first: the filter is a condition of the search itself, so the best are the best of what it keeps.
    `explain`: each with its score's parts (why it was recalled)."""
    bind = Bound()
    condition = wanted.sql("i", bind)
    found = search_memories(
        conn, settings, namespace, query, wanted.user(), agent_id=viewer, limit=top_k, threshold=threshold,
        item_filter=ItemFilter(condition, bind.params, tuple(sorted(wanted.visible_agents()))),
        explain=explain,
    )  # fmt: skip
    scores = {hit.id: (hit.score, hit.explain) for hit in found}
    return [
        Mem0Record(r.item, r.user_id, r.run_id, r.metadata, *scores[r.item.id])
        for r in records(conn, namespace, list(scores))
    ]


def page(
    conn: Connection, namespace: str, wanted: Mem0Filter, *, viewer: str | None, limit: int, offset: int
) -> tuple[list[Mem0Record], int]:
    """A page of the memories the filter keeps, newest first, and how many it keeps in all (in SQL)."""
    bind = Bound()
    condition = wanted.sql("mi", bind)
    params = {
        **bind.params, "namespace": namespace, "agent_id": viewer, "also": sorted(wanted.visible_agents()),
        "limit": limit, "offset": offset,
    }  # fmt: skip
    query = text(
        f"""select {RECORD_COLUMNS}, count(*) over () as total from memory_items as mi
        where mi.namespace = :namespace and {LIVE} and {VISIBLE} and {condition}
        order by mi.item_id desc limit :limit offset :offset"""
    )
    rows = conn.execute(query, params).mappings().all()
    total = int(rows[0]["total"]) if rows else 0
    if not rows and offset:
        count = text(
            f"""select count(*) from memory_items as mi
            where mi.namespace = :namespace and {LIVE} and {VISIBLE} and {condition}"""
        )
        total = int(conn.execute(count, params).scalar_one())
    return [_record(row) for row in rows], total


def get(conn: Connection, namespace: str, item_id: int, *, agent: str | None) -> Mem0Record:
    """The memory (MemoryNotFound when the agent does not see it, or it is deleted)."""
    api.get_memory(conn, namespace, item_id, agent_id=agent)
    return records(conn, namespace, [item_id])[0]


def history(
    conn: Connection, namespace: str, item_id: int, *, agent: str | None
) -> tuple[Mem0Record, list[MemoryVersion]]:
    """The memory and its versions, oldest first (a deleted memory: MemoryNotFound, as get)."""
    api.get_memory(conn, namespace, item_id, agent_id=agent)
    versions = api.memory_history(conn, namespace, item_id, agent_id=agent, include_deleted=False)
    return records(conn, namespace, [item_id])[0], versions


def entities(conn: Connection, namespace: str, *, viewer: str | None) -> list[EntityCount]:
    """The users, agents, runs and apps with memories the viewer sees (an entity's own subject is no user)."""
    return [
        e for e in entity_counts(conn, namespace, agent_id=viewer) if not (e.type == "user" and "/" in e.name)
    ]


def entity_counts(conn: Connection, namespace: str, *, agent_id: str | None) -> list[EntityCount]:
    """Users, agents and runs with active items the agent sees, by type and name."""
    params = {"namespace": namespace, "agent_id": agent_id, "include_deleted": False}
    return [
        EntityCount(row.entity_type, row.name, int(row.total), row.created_at, row.updated_at)
        for row in conn.execute(SELECT_ENTITIES, params)
    ]


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


# ------------------------------------------------------------------------------------------------ writes
def add_texts(
    conn: Connection, settings: Settings, namespace: str, texts: Sequence[str], scope: AddScope
) -> list[Added]:
    """infer=False: each text a memory of the user (else of the agent or run alone), embedded now; a text the
    same user and agent have already is that memory (event NONE)."""
    subject = scope.user_id or entity_subject(scope.agent_id, scope.run_id)
    shared = scope.user_id is None and scope.agent_id is not None  # an agent's own knowledge
    added = []
    with item_embedding.encoded_ahead(settings, list(texts)):
        for said in texts:
            try:
                written = api.create_memory(
                    conn, namespace, subject, ENTRY_TYPE, mem0_entry_name(said), said,
                    agent_id=scope.agent_id, shared=shared, settings=settings,
                    metadata=mem0_metadata(scope.metadata, scope.run_id, scope.app_id),
                )  # fmt: skip
                item_id, event = written.item.id, "ADD"
            except api.MemoryConflict as taken:  # the same text is stored already: that memory
                item_id, event = taken.item_id, "NONE"
            added.append(Added(records(conn, namespace, [item_id])[0], event))
    return added


def queue_turns(
    conn: Connection, settings: Settings, namespace: str, turns: Sequence[Mapping[str, str]], scope: AddScope
) -> tuple[str, OnlineWrite]:
    """infer=True: the turns written to L1 as POST /v1/messages writes them, for the extract stage; their
    event id and what the write did. A run_id is their conversation; without one they get a conversation of
    their own, which is no run (RUN_SQL)."""
    event_id = str(uuid.uuid4())
    said = datetime.now(UTC)
    records_ = [
        {
            "conversation_id": scope.run_id or f"mem0-{event_id}",
            "subject_id": scope.user_id,
            "source": SOURCE,
            "source_message_id": f"{event_id}:{position}",
            "role": turn["role"],
            "content": turn["content"],
            "created_at": (said + timedelta(microseconds=position)).isoformat(),
            "agent_id": scope.agent_id,
            "metadata": mem0_metadata(scope.metadata, None, scope.app_id),
        }  # fmt: skip
        for position, turn in enumerate(turns)
    ]
    return event_id, write_messages(conn, settings, namespace, records_)


def event(conn: Connection, namespace: str, event_id: str, *, agent: str | None) -> Event | None:
    """An infer=True add's event (None: no such event in the namespace)."""
    found = message_progress(conn, namespace, SOURCE, [f"{event_id}:{i}" for i in range(MAX_EVENT_MESSAGES)])
    if not found:
        return None
    done = all(message.extracted for message in found)
    made: list[Mem0Record] = []
    if done:
        bind = Bound()
        lineage = f"mi.source_message_ids && {bind([m.message_id for m in found], 'bigint[]')}"
        wanted = text(
            f"""select mi.item_id from memory_items as mi where mi.namespace = :namespace
            and mi.subject_id = :subject_id and {LIVE} and {api.visible_to_agent()} and {lineage}
            order by mi.item_id"""
        )
        params = {
            **bind.params,
            "namespace": namespace,
            "subject_id": found[0].subject_id,
            "agent_id": agent or found[0].agent_id,
        }
        made = records(conn, namespace, [int(i) for i in conn.execute(wanted, params).scalars()])
    return Event(event_id, found, done, made)


def update(
    conn: Connection,
    settings: Settings,
    namespace: str,
    changes: Sequence[tuple[int, str | None, Mapping[str, Any] | None]],
    *,
    agent: str | None,
) -> list[Mem0Record]:
    """Each (memory id, new text or None, metadata or None): a new text (the memory's name follows it)
    and/or metadata (merged), a new version with the old one in history; all or none (MemoryNotFound,
    MemoryConflict when another live memory of the user and agent has the text: the caller's transaction
    is rolled back)."""
    texts = [said for _, said, _ in changes if said is not None]
    with item_embedding.encoded_ahead(settings, texts):
        for item_id, said, metadata in changes:
            api.update_memory(
                conn, namespace, item_id, agent_id=agent, metadata=metadata, settings=settings,
                name=None if said is None else mem0_entry_name(said),
                value=api.UNSET if said is None else said,
            )  # fmt: skip
    return records(conn, namespace, [item_id for item_id, _, _ in changes])


def delete(conn: Connection, namespace: str, item_ids: Sequence[int], *, agent: str | None) -> int:
    """Delete these memories (versioned: their history stays); all or none (MemoryNotFound)."""
    for item_id in item_ids:
        api.delete_memory(conn, namespace, item_id, agent_id=agent)
    return len(item_ids)


def delete_matching(
    conn: Connection, namespace: str, wanted: Mem0Filter, *, viewer: str | None, every_agent: bool = False
) -> int:
    """Every live memory the filter keeps that the request may change, versioned; how many. It may change
    its viewer's own, the namespace's and those of the agents the filter names, or, `every_agent` (a caller
    that may write the whole namespace: reset, delete_users), every agent's. The caller refuses a filter that
    names no entity (delete_all never means everything)."""
    bind = Bound()
    condition = wanted.sql("mi", bind)
    params = {
        **bind.params,
        "namespace": namespace,
        "agent_id": viewer,
        "also": sorted(wanted.visible_agents()),
    }
    found = text(
        f"""select mi.item_id, mi.subject_id, mi.agent_id, mi.kind, mi.key, mi.valid_from
        from memory_items as mi
        where mi.namespace = :namespace and {LIVE} and {"true" if every_agent else CHANGEABLE} and {condition}
        order by mi.item_id for update"""
    )
    rows = conn.execute(found, params).mappings().all()
    for row in rows:
        api.delete_row(conn, namespace, row)
    return len(rows)
