"""/mem0: the paths of mem0's platform API that its official client (mem0ai 2.2.1: MemoryClient and
AsyncMemoryClient with host=BASE + "/mem0") calls, over strataflow's one L2 API. Every route is one or a few
calls into the library (strataflow.memory.api and item_sets, strataflow.retrieval.item_search, ingest.online
and message_progress); the shapes are strataflow.service.mem0_shapes. Paths keep the client's trailing slash.

Authentication: `Authorization: Token KEY` (what the client sends) or `Bearer KEY`; the key's role gives the
namespace (X-Namespace picks one of several) and, for a key bound to an agent, the agent. `agent_id` of a
request acts as that agent (its own entries, shared ones and the namespace's); a key bound to another agent
gets 403. Deleting a whole entity (DELETE /v2/entities/{type}/{name}/, which the client's reset() and
delete_users() call) takes a key that may write the whole namespace: an agent-bound key gets 403. A
delete_all deletes exactly what its identity fields name (their intersection) and is refused without one.
An unknown query parameter or body field is refused (400 naming it) on every route.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, BackgroundTasks, Depends, Path, Query, Request
from sqlalchemy import Connection

from models.memory_items import MemoryItem
from strataflow.config import Settings
from strataflow.ingest.message_progress import message_progress
from strataflow.ingest.online import write_messages
from strataflow.memory import adapters, api, item_embedding, item_sets
from strataflow.ops.freshness import emit_messages_received
from strataflow.retrieval.item_search import search_memories
from strataflow.service import mem0_shapes as shapes
from strataflow.service.deps import SettingsDep
from strataflow.service.errors import ApiError, error_response, error_responses
from strataflow.service.keys import Caller
from strataflow.service.mem0_deps import (
    AgentParam,
    MemoryId,
    Session,
    WriterOpener,
    checked_filter,
    item_id_of,
    known_query,
    mem0_work,
    memories,
    namespace_writer,
    query_filters,
    viewers,
)
from strataflow.service.mem0_schemas import (
    MAX_ADD_MESSAGES,
    MAX_PAGE,
    MAX_STORED_MESSAGES,
    Mem0Add,
    Mem0AddAnswer,
    Mem0AddResult,
    Mem0Done,
    Mem0Entities,
    Mem0Event,
    Mem0EventResult,
    Mem0HistoryEntry,
    Mem0List,
    Mem0Memory,
    Mem0Page,
    Mem0Ping,
    Mem0Results,
    Mem0Search,
    Mem0Update,
)
from strataflow.service.schemas import Id, SubjectId

router = APIRouter(prefix="/mem0", tags=["mem0-compatible"], dependencies=[Depends(known_query)])
SOURCE = "mem0"  # the L1 source of messages added with infer=true (their keys: "<event id>:<position>")
QUEUED = "Memory processing has been queued for background execution"
READ = error_responses()


@router.get("/v1/ping/", response_model=Mem0Ping, responses=READ, dependencies=[mem0_work("ping")])
def ping(session: Session) -> Mem0Ping:
    """What the client calls on start: 200 for a usable key (401 otherwise). The client needs an org_id and a
    project_id: the server's name and the key's namespace."""
    namespace = session[1].namespace
    return Mem0Ping(
        status="ok", message="pong", namespace=namespace, org_id="strataflow", project_id=namespace
    )


@router.post(
    "/v3/memories/add/", response_model=Mem0AddAnswer, responses=READ,
    dependencies=[mem0_work("write", "heavy")],
)  # fmt: skip
def add(body: Mem0Add, writer: WriterOpener, settings: SettingsDep, background: BackgroundTasks) -> Any:
    """infer=false: each message's text is stored as a memory now; infer=true (the default): the messages go
    to L1 (as POST /v1/messages) and the answer is an event, PENDING until the extract stage has made
    memories of them. The texts are embedded before the request takes a database connection."""
    opener, acting = writer
    caller = acting.caller
    ids = body.filters
    user_id = body.user_id or (ids.user_id if ids else None)
    run_id = body.run_id or (ids.run_id if ids else None)
    app_id = body.app_id or (ids.app_id if ids else None)
    agent = acting.agent if body.agent_id else caller.agent_for(ids.agent_id if ids else None)
    if not user_id:
        raise ApiError(400, "user_id is required: strataflow memories are about a user (subject)", "user_id")
    turns = [{"role": "user", "content": body.messages}] if isinstance(body.messages, str) else [
        message.model_dump(include={"role", "content"}) for message in body.messages
    ]  # fmt: skip
    if body.infer:
        with opener() as db:
            return _queue(db, caller, settings, turns, user_id, agent, run_id, app_id, body, background)
    if len(turns) > MAX_STORED_MESSAGES:
        raise ApiError(
            413, f"an infer=false add stores (and embeds) each message at once: at most "
            f"{MAX_STORED_MESSAGES} messages per request, got {len(turns)}", "messages",
            code="too_many_messages",
        )  # fmt: skip
    stored = [turn for turn in turns if turn["role"] != "system" and turn["content"].strip()]
    with item_embedding.encoded_ahead(settings, [turn["content"] for turn in stored]), opener() as db:
        results = [_store(db, caller, settings, t, user_id, agent, run_id, app_id, body) for t in stored]
        return Mem0AddAnswer(message="Memories stored", status="SUCCEEDED", results=results)


def _store(
    db: Connection,
    caller: Caller,
    settings: Settings,
    turn: dict[str, Any],
    user_id: str,
    agent: str | None,
    run_id: str | None,
    app_id: str | None,
    body: Mem0Add,
) -> Mem0AddResult:
    """One infer=false message stored as a memory (or the memory that has its text already)."""
    try:
        written = api.create_memory(
            db, caller.namespace, user_id, shapes.ENTRY_TYPE, adapters.mem0_entry_name(turn["content"]),
            turn["content"], agent_id=agent,
            metadata=adapters.mem0_metadata(body.metadata, run_id, app_id),
            settings=settings,
        )  # fmt: skip
        item, event = written.item, "ADD"
    except api.MemoryConflict as taken:  # the same text is stored already: that memory
        item, event = api.get_memory(db, caller.namespace, taken.item_id, agent_id=agent), "NONE"
    return Mem0AddResult(
        id=str(item.id),
        memory=item.content,
        event=event,
        user_id=item.subject,
        agent_id=item.agent,
        run_id=run_id,
        metadata=shapes.shown_metadata(item),
    )


def _queue(
    db: Connection,
    caller: Caller,
    settings: Settings,
    turns: list[dict[str, Any]],
    user_id: str,
    agent: str | None,
    run_id: str | None,
    app_id: str | None,
    body: Mem0Add,
    background: BackgroundTasks,
) -> Any:
    event_id = str(uuid.uuid4())
    said = datetime.now(UTC)
    records = [
        {
            "conversation_id": run_id or f"mem0-{event_id}",
            "subject_id": user_id,
            "source": SOURCE,
            "source_message_id": f"{event_id}:{position}",
            "role": turn["role"],
            "content": turn["content"],
            "created_at": (said + timedelta(microseconds=position)).isoformat(),
            "agent_id": agent,
            "metadata": adapters.mem0_metadata(body.metadata, None, app_id),
        }  # fmt: skip
        for position, turn in enumerate(turns)
    ]
    written = write_messages(db, settings, caller.namespace, records)
    if written.accepted == 0 and written.problems:
        first = written.problems[0]
        return error_response(422, first.error, f"messages.{first.position}.{first.field}", code=first.reason)
    if written.inserted + written.updated:  # after the commit and the response: never delays nor fails it
        background.add_task(
            emit_messages_received, settings, caller.namespace, [user_id], written.inserted + written.updated
        )
    return Mem0AddAnswer(message=QUEUED, status="PENDING", event_id=event_id)


@router.get(
    "/v1/event/{event_id}/", response_model=Mem0Event, responses=READ, dependencies=[mem0_work("read")]
)
def event(
    event_id: Annotated[str, Path(max_length=40)], session: Session, agent_id: AgentParam = None
) -> Mem0Event:
    """An infer=true add: PENDING until the extract stage (nightly, backfill or `strataflow extract`) has read
    its messages, then SUCCEEDED with the memories made of them."""
    db, acting = session
    caller = acting.caller
    try:
        eid = str(uuid.UUID(event_id))
    except ValueError:
        raise ApiError(404, f"no event {event_id!r}", "event_id") from None
    found = message_progress(db, caller.namespace, SOURCE, [f"{eid}:{i}" for i in range(MAX_ADD_MESSAGES)])
    if not found:
        raise ApiError(404, f"no event {event_id!r}", "event_id")
    done = all(message.extracted for message in found)
    first = found[0]
    made = item_sets.items_from_messages(
        db, caller.namespace, first.subject_id, [m.message_id for m in found],
        agent_id=acting.agent or first.agent_id,
    ) if done else []  # fmt: skip
    created = min(message.ingested_at for message in found)
    updated = max([created, *(item.updated_at for item in made)])
    return Mem0Event(
        id=eid, event_type="ADD", status="SUCCEEDED" if done else "PENDING",
        payload={
            "messages": [{"role": m.role, "content": m.content} for m in found], "user_id": first.subject_id,
            "agent_id": first.agent_id, "run_id": first.conversation_id, "metadata": first.metadata,
        },
        metadata={"namespace": caller.namespace},
        results=[
            Mem0EventResult(
                id=str(item.id), event="ADD", user_id=item.subject, agent_id=item.agent,
                memory=adapters.mem0_text(item.content, item.statement, item.source),
                data={"memory": adapters.mem0_text(item.content, item.statement, item.source)},
            )
            for item in made
        ],
        created_at=created, updated_at=updated, completed_at=updated if done else None,
    )  # fmt: skip


@router.post(
    "/v3/memories/search/", response_model=Mem0Results, responses=READ,
    dependencies=[mem0_work("search", "heavy")],
)  # fmt: skip
def search(body: Mem0Search, session: Session, settings: SettingsDep) -> Mem0Results:
    """The memories that best match `query` (the one ranking: words and meaning), best first, within the
    filters: {"results": [memory + score]}."""
    db, acting = session
    caller = acting.caller
    wanted = checked_filter(
        body.filters, caller, user_id=body.user_id, agent_id=body.agent_id, run_id=body.run_id,
        app_id=body.app_id,
    )  # fmt: skip
    scores: dict[int, float] = {}
    found: list[MemoryItem] = []
    for subject, agents in wanted.scopes():
        for viewer in viewers(caller, agents):
            for hit in search_memories(
                db, settings, caller.namespace, body.query, subject, agent_id=viewer, limit=body.top_k * 3,
                written_by=agents,
            ):  # fmt: skip
                scores[hit.id] = max(scores.get(hit.id, 0.0), hit.score)
                found.append(hit)
    kept = [(item, run) for item, run in memories(db, caller, found, wanted)]
    kept.sort(key=lambda pair: -scores[pair[0].id])
    hits = [shapes.hit_of(item, run, scores[item.id]) for item, run in kept]
    return Mem0Results(
        results=[h for h in hits if body.threshold is None or h.score >= body.threshold][: body.top_k]
    )


@router.post(
    "/v3/memories/", response_model=Mem0Page, responses=READ, dependencies=[mem0_work("list", "heavy")]
)
def get_all(
    body: Mem0List,
    session: Session,
    request: Request,
    page: Annotated[int | None, Query(ge=1, le=MAX_PAGE)] = None,
    page_size: Annotated[int | None, Query(ge=1, le=1000)] = None,
) -> Mem0Page:
    """The memories within the filters, newest first, a page at a time: {count, next, previous, results}."""
    db, acting = session
    caller = acting.caller
    wanted = checked_filter(body.filters, caller)
    number, size = page or body.page or 1, page_size or body.page_size or 100
    condition, params = adapters.filter_sql(wanted, caller.agent)
    start = (number - 1) * size
    found, total = item_sets.filtered_page(
        db, caller.namespace, condition, params, limit=size, offset=start
    )  # counted and paged in SQL
    link = str(request.url.remove_query_params(["page", "page_size"]))
    more = start + size < total
    return Mem0Page(
        count=total,
        next=f"{link}?page={number + 1}&page_size={size}" if more else None,
        previous=f"{link}?page={number - 1}&page_size={size}" if number > 1 else None,
        results=[shapes.memory_of(item, run) for item, run in memories(db, caller, found)],
    )


@router.get(
    "/v1/memories/{memory_id}/", response_model=Mem0Memory, responses=READ, dependencies=[mem0_work("read")]
)
def get(memory_id: MemoryId, session: Session, agent_id: AgentParam = None) -> Mem0Memory:
    db, acting = session
    item = api.get_memory(db, acting.namespace, item_id_of(memory_id), agent_id=acting.agent)
    return shapes.memory_of(*memories(db, acting.caller, [item])[0])


@router.put(
    "/v1/memories/{memory_id}/",
    response_model=Mem0Memory,
    responses=READ,
    dependencies=[mem0_work("write", "scan")],
)
def update(
    memory_id: MemoryId,
    body: Mem0Update,
    session: Session,
    settings: SettingsDep,
    agent_id: AgentParam = None,
) -> Mem0Memory:
    """A new text (the memory's name follows it) and/or metadata (merged): a new version, the old one in
    history. A text only another live memory has is refused (409 naming that memory's URL)."""
    db, acting = session
    acting.require_writer()
    try:
        written = api.update_memory(
            db, acting.namespace, item_id_of(memory_id), agent_id=acting.agent,
            name=None if body.text is None else adapters.mem0_entry_name(body.text),
            value=api.UNSET if body.text is None else body.text, metadata=body.metadata, settings=settings,
        )  # fmt: skip
    except api.MemoryConflict as taken:
        raise ApiError(
            409, f"memory {taken.item_id} already says this for the same user and agent "
            f"(GET /mem0/v1/memories/{taken.item_id}/): update or delete that one instead", "text",
            code="conflict",
        ) from None  # fmt: skip
    return shapes.memory_of(*memories(db, acting.caller, [written.item])[0])


@router.delete(
    "/v1/memories/{memory_id}/", response_model=Mem0Done, responses=READ, dependencies=[mem0_work("delete")]
)
def delete(memory_id: MemoryId, session: Session, agent_id: AgentParam = None) -> Mem0Done:
    """Delete one memory (versioned: its history stays)."""
    db, acting = session
    acting.require_writer()
    api.delete_memory(db, acting.namespace, item_id_of(memory_id), agent_id=acting.agent)
    return Mem0Done(message="Memory deleted successfully!")


@router.get(
    "/v1/memories/{memory_id}/history/", response_model=list[Mem0HistoryEntry], responses=READ,
    dependencies=[mem0_work("read")],
)  # fmt: skip
def history(memory_id: MemoryId, session: Session, agent_id: AgentParam = None) -> list[Mem0HistoryEntry]:
    db, acting = session
    agent, item_id = acting.agent, item_id_of(memory_id)
    item = api.get_memory(db, acting.namespace, item_id, agent_id=agent)  # a deleted memory: 404, as get
    versions = api.memory_history(db, acting.namespace, item_id, agent_id=agent, include_deleted=False)
    return shapes.history_of(item, versions)


@router.delete(
    "/v1/memories/", response_model=Mem0Done, responses=READ, dependencies=[mem0_work("delete", "heavy")]
)
def delete_all(
    session: Session,
    user_id: Annotated[SubjectId | None, Query()] = None,
    agent_id: Annotated[SubjectId | None, Query()] = None,
    run_id: Annotated[Id | None, Query()] = None,
    app_id: Annotated[Id | None, Query()] = None,
    filters: Annotated[
        str | None,
        Query(max_length=4096, include_in_schema=False),  # mem0ai 2.2.1 sends the identity fields here
    ] = None,
) -> Mem0Done:
    """Delete exactly the memories the identity fields name together (their intersection: top-level fields
    AND `filters`) that the request may change. At least one identity field is required: deleting a whole
    namespace is `reset` (DELETE /v2/entities/... for each entity), never a delete_all without a scope."""
    db, acting = session
    caller = acting.caller
    caller.require_writer()
    wanted = checked_filter(
        query_filters(filters), caller, user_id=user_id, agent_id=agent_id, run_id=run_id, app_id=app_id
    )
    if not wanted.identified():
        raise ApiError(
            403, "delete_all needs at least one of user_id, agent_id, run_id, app_id (top level or in "
            "filters); to delete every memory of the namespace use reset()", "filters", code="scope_required",
        )  # fmt: skip
    owners: dict[int, str | None] = {}  # item -> the agent that may delete it (None: the namespace's)
    found: list[MemoryItem] = []
    for subject, agents in wanted.scopes():
        for viewer in viewers(caller, agents):
            for item in item_sets.every_memory(db, caller.namespace, subject, agent_id=viewer):
                if item.agent in (None, viewer):  # the viewer's own and the namespace's, not others' shared
                    owners[item.id] = viewer
                    found.append(item)
    for item, _ in memories(db, caller, found, wanted):
        api.delete_memory(db, caller.namespace, item.id, agent_id=owners[item.id])
    return Mem0Done(message="Memories deleted successfully!")


@router.get("/v1/entities/", response_model=Mem0Entities, responses=READ, dependencies=[mem0_work("list")])
def entities(session: Session) -> Mem0Entities:
    """The users, agents and runs that have memories the request sees."""
    db, acting = session
    caller = acting.caller
    found = item_sets.entity_counts(db, caller.namespace, agent_id=caller.agent)
    return Mem0Entities(results=[shapes.entity_of(e, caller.key_name, caller.namespace) for e in found])


@router.delete(
    "/v2/entities/{entity_type}/{name}/", response_model=Mem0Done, responses=READ,
    dependencies=[mem0_work("delete")],
)  # fmt: skip
def delete_entity(
    entity_type: Annotated[Literal["user", "agent", "run", "app"], Path()],
    name: Annotated[Id, Path()],
    session: Session,
) -> Mem0Done:
    """Delete every memory of a user, agent or run, whichever agent owns it (the client's delete_users and
    reset): a key that may write the whole namespace."""
    db, acting = session
    caller = acting.caller
    namespace_writer(caller, "deleting an entity")
    scope = {"user": "subject_id", "agent": "owner", "run": "conversation_id", "app": "app_id"}[entity_type]
    item_sets.delete_memories(db, caller.namespace, viewer=None, every_agent=True, **{scope: name})
    return Mem0Done(message="Entity deleted successfully.")
