"""/mem0: the paths of mem0's platform API that its official client (mem0ai 2.2.1: MemoryClient and
AsyncMemoryClient with host=BASE + "/mem0") calls. Each route parses the request, calls one function of
strataflow.adapters.mem0 (the mapping, the filters compiled to SQL, the writes through the one L2 API) and
shapes its answer (strataflow.service.mem0_shapes). Paths keep the client's trailing slash.

Authentication: `Authorization: Token KEY` (what the client sends) or `Bearer KEY`; the key's role gives the
namespace (X-Namespace picks one of several) and, for a key bound to an agent, the agent. `agent_id` of a
request acts as that agent (its own memories, shared ones and the namespace's); a key bound to another agent
gets 403; by id, a key bound to no agent acts as the memory's own agent. Deleting a whole entity (DELETE
/v2/entities/{type}/{name}/, which the client's reset() and delete_users() call) takes a key that may write
the whole namespace: an agent-bound key gets 403. A delete_all deletes exactly what its filter keeps and is
refused without an entity id (400, as mem0's own REST server refuses it). An unknown query parameter or body
field is refused (400 naming it). The routes of mem0's platform that strataflow does not serve (feedback,
summaries, exports, profiles, webhooks, projects) answer 501 naming the feature: never 404, which the client
reads as "memory not found".
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Annotated, Any, Literal

from fastapi import APIRouter, BackgroundTasks, Depends, Path, Query, Request

from strataflow.adapters import mem0
from strataflow.adapters.mem0_names import shown_metadata
from strataflow.config import Settings
from strataflow.memory import item_embedding
from strataflow.ops.freshness import emit_messages_received
from strataflow.service import mem0_shapes as shapes
from strataflow.service.deps import SettingsDep
from strataflow.service.errors import ApiError, error_response, error_responses
from strataflow.service.mem0_deps import (
    AgentParam,
    MemoryId,
    Session,
    WriterOpener,
    checked_filter,
    item_id_of,
    known_query,
    mem0_work,
    namespace_writer,
    query_filters,
)
from strataflow.service.mem0_schemas import (
    MAX_STORED_MESSAGES,
    Mem0Add,
    Mem0AddAnswer,
    Mem0BatchDelete,
    Mem0BatchUpdate,
    Mem0Done,
    Mem0Entities,
    Mem0Event,
    Mem0HistoryEntry,
    Mem0List,
    Mem0Memory,
    Mem0Page,
    Mem0Ping,
    Mem0Results,
    Mem0Search,
    Mem0Update,
)
from strataflow.service.openapi import ONE_OF_QUERY
from strataflow.service.routes import mem0_not_served
from strataflow.service.schemas import Id, SubjectId

router = APIRouter(prefix="/mem0", tags=["mem0-compatible"], dependencies=[Depends(known_query)])
QUEUED = "Memory processing has been queued for background execution"
READ = error_responses()
SCOPE_REQUIRED = "At least one identifier is required: user_id, agent_id, run_id or app_id"


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
    """infer=false: each message's text is stored as a memory now (of the user, else of the agent or run
    alone); infer=true (the default): the messages go to L1 (as POST /v1/messages) and the answer is an
    event, PENDING until the extract stage has made memories of them."""
    opener, acting = writer
    caller = acting.caller
    ids = body.filters
    user_id = body.user_id or (ids.user_id if ids else None)
    run_id = body.run_id or (ids.run_id if ids else None)
    app_id = body.app_id or (ids.app_id if ids else None)
    agent = acting.agent if body.agent_id else caller.agent_for(ids.agent_id if ids else None)
    if not (user_id or agent or run_id):
        raise ApiError(400, "At least one of user_id, agent_id or run_id is required", "user_id")
    turns = [{"role": "user", "content": body.messages}] if isinstance(body.messages, str) else [
        message.model_dump(include={"role", "content"}) for message in body.messages
    ]  # fmt: skip
    scope = mem0.AddScope(user_id, agent, run_id, app_id, body.metadata)
    if body.infer:
        if not user_id:
            raise ApiError(
                400, "infer=true extracts memories about a user: user_id is required (a memory of an agent "
                "or run alone: infer=false)", "user_id",
            )  # fmt: skip
        with opener() as db:
            event_id, written = mem0.queue_turns(db, settings, acting.namespace, turns, scope)
        if written.accepted == 0 and written.problems:
            first = written.problems[0]
            return error_response(
                422, first.error, f"messages.{first.position}.{first.field}", code=first.reason
            )
        if written.inserted + written.updated:  # after the commit and the response: never delays nor fails it
            changed = written.inserted + written.updated
            background.add_task(emit_messages_received, settings, acting.namespace, [user_id], changed)
        return Mem0AddAnswer(message=QUEUED, status="PENDING", event_id=event_id)
    if len(turns) > MAX_STORED_MESSAGES:
        raise ApiError(
            413, f"an infer=false add stores (and embeds) each message at once: at most "
            f"{MAX_STORED_MESSAGES} messages per request, got {len(turns)}", "messages",
            code="too_many_messages",
        )  # fmt: skip
    texts = [t["content"] for t in turns if t["role"] != "system" and t["content"].strip()]
    with item_embedding.encoded_ahead(settings, texts), opener() as db:  # encoded before the connection
        added = mem0.add_texts(db, settings, acting.namespace, texts, scope)
    return Mem0AddAnswer(
        message="Memories stored",
        status="SUCCEEDED",
        results=[shapes.added_of(a.record, a.event) for a in added],
    )


@router.get(
    "/v1/event/{event_id}/", response_model=Mem0Event, responses=READ, dependencies=[mem0_work("read")]
)
def event(
    event_id: Annotated[str, Path(max_length=40)], session: Session, agent_id: AgentParam = None
) -> Mem0Event:
    """An infer=true add: PENDING until the extract stage (nightly, backfill or `strataflow extract`) has read
    its messages, then SUCCEEDED with the memories made of them."""
    db, acting = session
    try:
        eid = str(uuid.UUID(event_id))
    except ValueError:
        raise ApiError(404, f"no event {event_id!r}", "event_id") from None
    found = mem0.event(db, acting.namespace, eid, agent=acting.agent)
    if found is None:
        raise ApiError(404, f"no event {event_id!r}", "event_id")
    first = found.messages[0]
    created = min(message.ingested_at for message in found.messages)
    updated = max([created, *(made.item.updated_at for made in found.made)])
    return Mem0Event(
        id=eid, event_type="ADD", status="SUCCEEDED" if found.done else "PENDING",
        payload={
            "messages": [{"role": m.role, "content": m.content} for m in found.messages],
            "user_id": first.subject_id, "agent_id": first.agent_id,
            "run_id": None if first.conversation_id == f"mem0-{eid}" else first.conversation_id,
            "metadata": shown_metadata(first.metadata),
        },
        metadata={"namespace": acting.namespace}, results=[shapes.made_of(made) for made in found.made],
        created_at=created, updated_at=updated, completed_at=updated if found.done else None,
    )  # fmt: skip


@router.post(
    "/v3/memories/search/", response_model=Mem0Results, responses=READ,
    dependencies=[mem0_work("search", "heavy")],
)  # fmt: skip
def search(body: Mem0Search, session: Session, settings: SettingsDep) -> Mem0Results:
    """The top_k memories that best match `query` (the one ranking: words and meaning) among those the
    filters keep, best first: {"results": [memory + score]}."""
    db, acting = session
    caller = acting.caller
    wanted = checked_filter(
        body.filters, caller, user_id=body.user_id, agent_id=body.agent_id, run_id=body.run_id,
        app_id=body.app_id,
    )  # fmt: skip
    found = mem0.search(
        db, settings, acting.namespace, body.query, wanted, viewer=acting.agent, top_k=body.top_k,
        threshold=body.threshold, explain=body.explain,
    )  # fmt: skip
    return Mem0Results(results=[shapes.hit_of(record) for record in found])


@router.post(
    "/v3/memories/", response_model=Mem0Page, responses=READ, dependencies=[mem0_work("list", "heavy")]
)
def get_all(
    body: Mem0List,
    session: Session,
    request: Request,
    page: Annotated[int | None, Query(ge=1, le=100_000)] = None,
    page_size: Annotated[int | None, Query(ge=1, le=1000)] = None,
) -> Mem0Page:
    """The memories the filters keep, newest first, a page at a time: {count, next, previous, results}."""
    db, acting = session
    caller = acting.caller
    wanted = checked_filter(body.filters, caller)
    number, size = page or body.page or 1, page_size or body.page_size or 100
    start = (number - 1) * size
    found, total = mem0.page(db, acting.namespace, wanted, viewer=acting.agent, limit=size, offset=start)
    link = str(request.url.remove_query_params(["page", "page_size"]))
    return Mem0Page(
        count=total,
        next=f"{link}?page={number + 1}&page_size={size}" if start + size < total else None,
        previous=f"{link}?page={number - 1}&page_size={size}" if number > 1 else None,
        results=[shapes.memory_of(record) for record in found],
    )


@router.get(
    "/v1/memories/{memory_id}/", response_model=Mem0Memory, responses=READ, dependencies=[mem0_work("read")]
)
def get(memory_id: MemoryId, session: Session, agent_id: AgentParam = None) -> Mem0Memory:
    db, acting = session
    found = mem0.get(db, acting.namespace, item_id_of(memory_id), agent=acting.agent)
    return shapes.memory_of(found)


@router.put(
    "/v1/memories/{memory_id}/",
    response_model=Mem0Memory,
    responses=READ,
    dependencies=[mem0_work("write", "scan")],
)
def update(
    memory_id: MemoryId,
    body: Mem0Update,
    writer: WriterOpener,
    settings: SettingsDep,
    agent_id: AgentParam = None,
) -> Mem0Memory:
    """A new text (the memory's name follows it) and/or metadata (merged): a new version, the old one in
    history. A text only another live memory of the user and agent has is refused (409 naming it). The new
    text is encoded before the database connection is taken."""
    opener, acting = writer
    change = [(item_id_of(memory_id), body.text, body.metadata)]
    with _conflict_answered(), _encoded_first(settings, change), opener() as db:
        found = mem0.update(db, settings, acting.namespace, change, agent=acting.agent)
    return shapes.memory_of(found[0])


@router.put("/v1/batch/", response_model=Mem0Done, responses=READ, dependencies=[mem0_work("write", "heavy")])
def batch_update(body: Mem0BatchUpdate, writer: WriterOpener, settings: SettingsDep) -> Mem0Done:
    """The client's batch_update: each memory's new text and/or metadata, all or none (the new texts encoded
    in one call before the database connection is taken)."""
    opener, acting = writer
    changes = [(item_id_of(m.memory_id), m.text, m.metadata) for m in body.memories]
    with _conflict_answered(), _encoded_first(settings, changes), opener() as db:
        mem0.update(db, settings, acting.namespace, changes, agent=acting.agent)
    return Mem0Done(message=f"Successfully updated {len(changes)} memories")


def _encoded_first(
    settings: Settings, changes: list[tuple[int, str | None, Any]]
) -> AbstractContextManager[None]:
    """The changes' new texts encoded ahead (as add does), so no encode runs while a connection is held."""
    return item_embedding.encoded_ahead(settings, [text for _, text, _ in changes if text])


@contextmanager
def _conflict_answered() -> Iterator[None]:
    """A text another live memory of the user and agent has: 409 naming that memory's URL."""
    try:
        yield
    except mem0.api.MemoryConflict as taken:
        raise ApiError(
            409, f"memory {taken.item_id} already says this for the same user and agent "
            f"(GET /mem0/v1/memories/{taken.item_id}/): update or delete that one instead", "text",
            code="conflict",
        ) from None  # fmt: skip


@router.delete(
    "/v1/memories/{memory_id}/", response_model=Mem0Done, responses=READ, dependencies=[mem0_work("delete")]
)
def delete(memory_id: MemoryId, session: Session, agent_id: AgentParam = None) -> Mem0Done:
    """Delete one memory (versioned: its history stays)."""
    db, acting = session
    acting.require_writer()
    mem0.delete(db, acting.namespace, [item_id_of(memory_id)], agent=acting.agent)
    return Mem0Done(message="Memory deleted successfully!")


@router.delete(
    "/v1/batch/", response_model=Mem0Done, responses=READ, dependencies=[mem0_work("delete", "heavy")]
)
def batch_delete(body: Mem0BatchDelete, session: Session) -> Mem0Done:
    """The client's batch_delete: every memory named, all or none (versioned: their history stays)."""
    db, acting = session
    acting.require_writer()
    ids = [item_id_of(m.memory_id) for m in body.memories]
    mem0.delete(db, acting.namespace, ids, agent=acting.agent)
    return Mem0Done(message=f"Successfully deleted {len(ids)} memories")


@router.get(
    "/v1/memories/{memory_id}/history/", response_model=list[Mem0HistoryEntry], responses=READ,
    dependencies=[mem0_work("read")],
)  # fmt: skip
def history(memory_id: MemoryId, session: Session, agent_id: AgentParam = None) -> list[Mem0HistoryEntry]:
    db, acting = session
    found, versions = mem0.history(db, acting.namespace, item_id_of(memory_id), agent=acting.agent)
    return shapes.history_of(found, versions)


@router.delete(
    "/v1/memories/",
    response_model=Mem0Done,
    responses=READ,
    dependencies=[mem0_work("delete", "heavy")],
    openapi_extra={ONE_OF_QUERY: ["user_id", "agent_id", "run_id", "app_id"]},
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
    """Delete exactly the memories the identity fields and filters keep together that the request may
    change. An entity id is required (400 otherwise, as mem0's server answers): deleting a whole namespace is
    `reset` (DELETE /v2/entities/... for each entity), never a delete_all without a scope."""
    db, acting = session
    caller = acting.caller
    acting.require_writer()
    wanted = checked_filter(
        query_filters(filters), caller, user_id=user_id, agent_id=agent_id, run_id=run_id, app_id=app_id
    )
    if not wanted.identified():
        raise ApiError(
            400,
            SCOPE_REQUIRED + "; to delete every memory of the namespace use reset()",
            "filters",
            code="scope_required",
        )
    mem0.delete_matching(db, acting.namespace, wanted, viewer=acting.agent)
    return Mem0Done(message="Memories deleted successfully!")


@router.get("/v1/entities/", response_model=Mem0Entities, responses=READ, dependencies=[mem0_work("list")])
def entities(session: Session) -> Mem0Entities:
    """The users, agents, runs and apps that have memories the request sees."""
    db, acting = session
    caller = acting.caller
    found = mem0.entities(db, acting.namespace, viewer=acting.agent)
    return Mem0Entities(results=[shapes.entity_of(e, caller.key_name, acting.namespace) for e in found])


@router.delete(
    "/v2/entities/{entity_type}/{name}/", response_model=Mem0Done, responses=READ,
    dependencies=[mem0_work("delete")],
)  # fmt: skip
def delete_entity(
    entity_type: Annotated[Literal["user", "agent", "run", "app"], Path()],
    name: Annotated[Id, Path()],
    session: Session,
) -> Mem0Done:
    """Delete every memory of a user, agent, run or app, whichever agent owns it (the client's delete_users
    and reset): a key that may write the whole namespace."""
    db, acting = session
    caller = acting.caller
    namespace_writer(caller, "deleting an entity")
    wanted = checked_filter({f"{entity_type}_id": name}, caller)
    mem0.delete_matching(db, acting.namespace, wanted, viewer=None, every_agent=True)
    return Mem0Done(message="Entity deleted successfully.")


# mem0 platform features strataflow does not serve: 501 naming each (routes/mem0_not_served.py)
router.include_router(mem0_not_served.router)
