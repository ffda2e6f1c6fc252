"""/v1/memories (seed 003 memory provider): the memory items of a user and an agent, through the one L2 API
(strataflow.memory.api; search: strataflow.retrieval.item_search)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query

from models.memory_items import MemoryHit, MemoryItem, MemoryPage, MemoryVersion
from strataflow.memory import api, item_embedding
from strataflow.retrieval import item_search
from strataflow.service.deps import CallerDep, DbDep, SettingsDep, WriterDep, WriterOpenerDep
from strataflow.service.errors import error_responses
from strataflow.service.mem0_deps import known_query
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


@router.post("", response_model=MemoryItem, status_code=201, responses=WRITE)
def create_memory(body: MemoryCreate, writer: WriterOpenerDep, settings: SettingsDep) -> MemoryItem:
    """Save a new entry; 409 when its name is taken for this subject and agent (PATCH that one instead).
    A text content is embedded before the request takes a database connection."""
    opener, caller = writer
    texts = [body.content] if isinstance(body.content, str) else []
    with item_embedding.encoded_ahead(settings, texts), opener() as db:
        return api.create_memory(
            db, caller.namespace, body.subject, body.type, body.name, body.content,
            description=body.description, agent_id=caller.agent_for(body.agent), shared=body.shared,
            metadata=body.metadata, settings=settings,
        ).item  # fmt: skip


@router.get("", response_model=MemoryPage, responses=READ)
def list_memories(params: Annotated[MemoryListParams, Query()], db: DbDep, caller: CallerDep) -> MemoryPage:
    """Entries newest first, a page at a time (pass next_cursor back as cursor)."""
    return api.list_memories(
        db, caller.namespace, params.subject, agent_id=caller.agent_for(params.agent), type=params.type,
        limit=params.limit,
        cursor=params.cursor,
    )  # fmt: skip


@router.post("/search", response_model=dict[str, list[MemoryHit]], responses=READ)
def search_memories(
    body: MemorySearch, db: DbDep, caller: CallerDep, settings: SettingsDep
) -> dict[str, list[MemoryHit]]:
    """Entries matching `query` (English and Chinese, words and meaning), best first: {"results": [...]}."""
    hits = item_search.search_memories(
        db, settings, caller.namespace, body.query, body.subject, agent_id=caller.agent_for(body.agent),
        type=body.type,
        limit=body.limit, threshold=body.threshold,
    )  # fmt: skip
    return {"results": hits}


@router.get("/{item_id:int}", response_model=MemoryItem, responses=READ)
def get_memory(item_id: ItemPath, db: DbDep, caller: CallerDep, agent: AgentQuery = None) -> MemoryItem:
    """One entry; 404 when the key's namespace (or the agent) cannot see it."""
    return api.get_memory(db, caller.namespace, item_id, agent_id=caller.agent_for(agent))


@router.patch("/{item_id:int}", response_model=MemoryItem, responses=WRITE)
def patch_memory(
    item_id: ItemPath,
    body: MemoryPatch,
    db: WriterDep,
    caller: CallerDep,
    settings: SettingsDep,
    agent: AgentQuery = None,
) -> MemoryItem:
    """Change type, name, description, content, sharing or metadata (a new version each time); 403 for
    another agent's entry."""
    return api.update_memory(
        db, caller.namespace, item_id, agent_id=caller.agent_for(agent), type=body.type, name=body.name,
        description=body.description, value=api.UNSET if body.content is None else body.content,
        shared=body.shared, metadata=body.metadata, settings=settings,
    ).item  # fmt: skip


@router.delete(
    "/{item_id:int}", response_model=MemoryItem, responses=WRITE, dependencies=[Depends(known_query)]
)
def delete_memory(
    item_id: ItemPath, db: WriterDep, caller: CallerDep, agent: AgentQuery = None
) -> MemoryItem:
    """Mark the entry deleted (its history stays); answers the entry as deleted."""
    return api.delete_memory(db, caller.namespace, item_id, agent_id=caller.agent_for(agent)).item


@router.get("/{item_id:int}/history", response_model=list[MemoryVersion], responses=READ)
def memory_history(
    item_id: ItemPath, db: DbDep, caller: CallerDep, agent: AgentQuery = None
) -> list[MemoryVersion]:
    """Every version of the entry, oldest first (valid_from/valid_to, recorded_at/superseded_at). A deleted
    entry is 404 here as at GET (its versions stay: `strataflow memory get --history`, SQL, export)."""
    return api.memory_history(
        db, caller.namespace, item_id, agent_id=caller.agent_for(agent), include_deleted=False
    )
