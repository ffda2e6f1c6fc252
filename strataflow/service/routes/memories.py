"""/v1/memories (seed 003 memory provider): named entries of a user and an agent (memory.entries)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from models.entries import Entry, EntryHit, EntryPage, EntryVersion
from strataflow.memory import entries
from strataflow.retrieval.item_search import search_entries
from strataflow.service.deps import CallerDep, DbDep, SettingsDep, WriterDep
from strataflow.service.errors import error_responses
from strataflow.service.schemas import (
    BIGINT_MAX,
    Agent,
    MemoryCreate,
    MemoryListParams,
    MemoryPatch,
    MemorySearch,
)

router = APIRouter(prefix="/v1/memories", tags=["memories"])
AgentQuery = Annotated[Agent, Query(description="the agent scope of the request")]
ItemPath = Annotated[int, Path(ge=1, le=BIGINT_MAX, description="the entry id")]
READ = WRITE = error_responses()


@router.post("", response_model=Entry, status_code=201, responses=WRITE)
def create_memory(body: MemoryCreate, db: WriterDep, caller: CallerDep) -> Entry:
    """Save a new entry; 409 when its name is taken for this subject and agent (update that one instead)."""
    return entries.save_entry(
        db, caller.namespace, body.subject, body.type, body.name, body.content, body.description,
        agent_id=caller.agent_for(body.agent), shared=body.shared, metadata=body.metadata,
    )  # fmt: skip


@router.get("", response_model=EntryPage, responses=READ)
def list_memories(params: Annotated[MemoryListParams, Query()], db: DbDep, caller: CallerDep) -> EntryPage:
    """Entries newest first, a page at a time (pass next_cursor back as cursor)."""
    return entries.list_entries(
        db,
        caller.namespace,
        params.subject,
        agent_id=caller.agent_for(params.agent),
        entry_type=params.type,
        limit=params.limit,
        cursor=params.cursor,
    )


@router.post("/search", response_model=dict[str, list[EntryHit]], responses=READ)
def search_memories(
    body: MemorySearch, db: DbDep, caller: CallerDep, settings: SettingsDep
) -> dict[str, list[EntryHit]]:
    """Entries matching `query` (English and Chinese, words and meaning), best first: {"results": [...]}."""
    hits = search_entries(
        db, settings, caller.namespace, body.query, body.subject, agent_id=caller.agent_for(body.agent),
        entry_type=body.type,
        limit=body.limit,
    )  # fmt: skip
    return {"results": hits}


@router.get("/{item_id:int}", response_model=Entry, responses=READ)
def get_memory(item_id: ItemPath, db: DbDep, caller: CallerDep, agent: AgentQuery = None) -> Entry:
    """One entry; 404 when the key's namespace (or the agent) cannot see it."""
    return entries.get_entry(db, caller.namespace, item_id, agent_id=caller.agent_for(agent))


@router.patch("/{item_id:int}", response_model=Entry, responses=WRITE)
def patch_memory(
    item_id: ItemPath, body: MemoryPatch, db: WriterDep, caller: CallerDep, agent: AgentQuery = None
) -> Entry:
    """Change type, name, description, content, sharing or metadata (a new version each time)."""
    return entries.update_entry(
        db, caller.namespace, item_id, agent_id=caller.agent_for(agent), entry_type=body.type, name=body.name,
        description=body.description, content=body.content, shared=body.shared, metadata=body.metadata,
    )  # fmt: skip


@router.delete("/{item_id:int}", response_model=Entry, responses=WRITE)
def delete_memory(item_id: ItemPath, db: WriterDep, caller: CallerDep, agent: AgentQuery = None) -> Entry:
    """Mark the entry deleted (its history stays); answers the entry as deleted."""
    return entries.delete_entry(db, caller.namespace, item_id, agent_id=caller.agent_for(agent))


@router.get("/{item_id:int}/history", response_model=list[EntryVersion], responses=READ)
def memory_history(
    item_id: ItemPath, db: DbDep, caller: CallerDep, agent: AgentQuery = None
) -> list[EntryVersion]:
    """Every version of the entry, oldest first (valid_from/valid_to, recorded_at/superseded_at)."""
    return entries.entry_history(db, caller.namespace, item_id, agent_id=caller.agent_for(agent))
