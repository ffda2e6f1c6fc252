"""/v1/memories (seed 003 memory provider): the memory items of a user and an agent, through the one L2 API
(strataflow.memory.api; search: strataflow.retrieval.item_search)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query

from models.memory_items import MemoryHit, MemoryItem, MemoryPage, MemoryVersion
from strataflow.memory import api, item_embedding
from strataflow.retrieval import item_search
from strataflow.service.deps import ActingDep, DbDep, OpenerDep, SettingsDep, WritingDep, work
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


@router.post(
    "", response_model=MemoryItem, status_code=201, responses=WRITE, dependencies=[work("write", "scan")]
)
def create_memory(body: MemoryCreate, writer: OpenerDep, settings: SettingsDep) -> MemoryItem:
    """Save a new entry; 409 when its name is taken for this subject and agent (PATCH that one instead).
    A text content is embedded before the request takes a database connection."""
    opener, acting = writer
    texts = [body.content] if isinstance(body.content, str) else []
    with item_embedding.encoded_ahead(settings, texts), opener() as db:
        return api.create_memory(
            db, acting.namespace, body.subject, body.type, body.name, body.content,
            description=body.description, agent_id=acting.agent, shared=body.shared, metadata=body.metadata,
            settings=settings,
        ).item  # fmt: skip


@router.get("", response_model=MemoryPage, responses=READ, dependencies=[work("list")])
def list_memories(params: Annotated[MemoryListParams, Query()], db: DbDep, acting: ActingDep) -> MemoryPage:
    """Entries newest first, a page at a time (pass next_cursor back as cursor)."""
    return api.list_memories(
        db, acting.namespace, params.subject, agent_id=acting.agent, type=params.type, limit=params.limit,
        cursor=params.cursor,
    )  # fmt: skip


@router.post(
    "/search", response_model=dict[str, list[MemoryHit]], responses=READ,
    dependencies=[work("search", "scan")],
)  # fmt: skip
def search_memories(
    body: MemorySearch, db: DbDep, acting: ActingDep, settings: SettingsDep
) -> dict[str, list[MemoryHit]]:
    """Entries matching `query` (English and Chinese, words and meaning), best first: {"results": [...]}."""
    hits = item_search.search_memories(
        db, settings, acting.namespace, body.query, body.subject, agent_id=acting.agent, type=body.type,
        limit=body.limit, threshold=body.threshold, explain=body.explain,
    )  # fmt: skip
    return {"results": hits}


@router.get("/{item_id:int}", response_model=MemoryItem, responses=READ, dependencies=[work("read")])
def get_memory(item_id: ItemPath, db: DbDep, acting: ActingDep, agent: AgentQuery = None) -> MemoryItem:
    """One entry; 404 when the key's namespace (or the agent) cannot see it."""
    return api.get_memory(db, acting.namespace, item_id, agent_id=acting.agent)


@router.patch(
    "/{item_id:int}", response_model=MemoryItem, responses=WRITE, dependencies=[work("write", "scan")]
)
def patch_memory(
    item_id: ItemPath,
    body: MemoryPatch,
    db: DbDep,
    acting: WritingDep,
    settings: SettingsDep,
    agent: AgentQuery = None,
) -> MemoryItem:
    """Change type, name, description, content, sharing or metadata (a new version each time); 403 for
    another agent's entry."""
    return api.update_memory(
        db, acting.namespace, item_id, agent_id=acting.agent, type=body.type, name=body.name,
        description=body.description, value=api.UNSET if body.content is None else body.content,
        shared=body.shared, metadata=body.metadata, settings=settings,
    ).item  # fmt: skip


@router.delete(
    "/{item_id:int}", response_model=MemoryItem, responses=WRITE,
    dependencies=[Depends(known_query), work("delete")],
)  # fmt: skip
def delete_memory(item_id: ItemPath, db: DbDep, acting: WritingDep, agent: AgentQuery = None) -> MemoryItem:
    """Mark the entry deleted (its history stays); answers the entry as deleted."""
    return api.delete_memory(db, acting.namespace, item_id, agent_id=acting.agent).item


@router.get(
    "/{item_id:int}/history", response_model=list[MemoryVersion], responses=READ, dependencies=[work("read")]
)
def memory_history(
    item_id: ItemPath, db: DbDep, acting: ActingDep, agent: AgentQuery = None
) -> list[MemoryVersion]:
    """Every version of the entry, oldest first (valid_from/valid_to, recorded_at/superseded_at). A deleted
    entry is 404 here as at GET (its versions stay: `strataflow memory get --history`, SQL, export)."""
    return api.memory_history(db, acting.namespace, item_id, agent_id=acting.agent, include_deleted=False)
