"""Bodies and answers of the mem0-compatible API (strataflow.service.routes.mem0), shaped as mem0's platform
API and its official client (mem0ai 2.2.1, mem0/client/main.py) send and read them.

Request bodies name every field the client may send; the ones strataflow has no equivalent for are either
ignored (say so in their description) or refused with 400 by the route when given a value that would change
the result (see docs/integrations.md, "What is mapped"). Any other field, in a body or the query, is refused
with 400 naming it: nothing sent to /mem0 is silently ignored.

Limits (bounded work per request, before it starts): MAX_ADD_MESSAGES messages per add (MAX_STORED_MESSAGES
with infer=false, each embedded at once), MAX_BATCH memories per batch update or delete, top_k <= 100, a
filter of at most strataflow.adapters.mem0_filters.MAX_CONDITIONS conditions (422 naming it).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from models.memory_items import Explain
from strataflow.service.mem0_filter_schema import MARK
from strataflow.service.schemas import Content, Id, Metadata, OptionalText, QueryText, Strict, SubjectId

MAX_ADD_MESSAGES = 100  # messages of one add (an event's messages are looked up by these positions)
MAX_PAGE = 100_000  # get_all's page number (offsets stay within what SQL counts)
MAX_STORED_MESSAGES = 20  # messages of one infer=false add: each is embedded in the request
MAX_BATCH = 100  # memories of one batch update or delete
Ignored = Field(None, description="accepted for compatibility; strataflow ignores it")
Role = Literal["user", "assistant", "system", "tool"]


FILTER_GRAMMAR = (
    "mem0's filters (strataflow.adapters.mem0_filters): keys ANDed; user_id, agent_id, run_id, app_id, "
    "created_at, updated_at, categories, `metadata` (an object of metadata fields) or any other key (a "
    "metadata field, mem0 OSS's flat form); each a value, '*' (any value), a list (one of) or an object of "
    "operators eq, ne, gt, gte, lt, lte, in, nin, contains, icontains (at most 2); AND / OR / NOT: lists of "
    "up to 5 filters (NOT: none of them) without AND / OR / NOT of their own. At most 8 keys and 8 metadata "
    "fields in `filters`, 4 and 4 in a filter of a list (the Mem0Filter schema says it exactly)."
)
Mem0Filter = Annotated[
    dict[str, Any],
    Field(
        description=FILTER_GRAMMAR,
        json_schema_extra={
            MARK: True,
            "examples": [{"user_id": "alice", "topic": "music", "prio": {"gte": 2}}],
        },  # fmt: skip
    ),
]


class AddIds(Strict):
    """The entity ids of an add given as filters (the typed options' way)."""

    user_id: SubjectId | None = None
    agent_id: SubjectId | None = None
    run_id: Id | None = None
    app_id: Id | None = None


class Mem0Message(Strict):
    role: Role = Field(description="user, assistant, system or tool (the canonical message roles)")
    content: Content = Field(description="the message text")
    name: OptionalText | None = Ignored


Turns = Annotated[list[Mem0Message], Field(min_length=1, max_length=MAX_ADD_MESSAGES)]


def _a_boolean(value: Any) -> Any:
    """Literal[False] accepts 0 (0 == False): only a JSON boolean is one."""
    if value is not None and not isinstance(value, bool):
        raise ValueError("must be a boolean")
    return value


# false or null: what the schema says; 0 is refused (Literal compares by equality, and 0 == False).
OnlyFalse = Annotated[Literal[False], BeforeValidator(_a_boolean)]


_ENTITY_IDS: list[dict[str, Any]] = [  # one of them, as a string (the JSON schema of an add's entity)
    {"required": [name], "properties": {name: {"type": "string"}}}
    for name in ("user_id", "agent_id", "run_id")
]


def _in_filters(schema: dict[str, Any]) -> dict[str, Any]:
    return {"required": ["filters"], "properties": {"filters": {"type": "object", **schema}}}


class Mem0Add(Strict):
    """POST /v3/memories/add/: entity ids at the top level (or in filters), infer=True by default; at least
    one of user_id, agent_id, run_id (a memory without a user belongs to its agent or run alone; infer=True
    extracts memories about a user: it needs user_id)."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "anyOf": [
                *_ENTITY_IDS,
                _in_filters({"anyOf": _ENTITY_IDS}),
            ],
            # infer=false stores and embeds each message in the request: at most MAX_STORED_MESSAGES
            "if": {"required": ["infer"], "properties": {"infer": {"const": False}}},
            "then": {"properties": {"messages": {"maxItems": MAX_STORED_MESSAGES}}},
            # infer=true (the default) extracts memories about a user: a user_id, at the top or in filters
            "else": {"anyOf": [_ENTITY_IDS[0], _in_filters(_ENTITY_IDS[0])]},
        },
    )
    messages: Turns | Content = Field(
        description="the conversation turns (or one text, read as a user message)"
    )
    user_id: SubjectId | None = Field(None, description="the user the memories are about (the subject)")
    agent_id: SubjectId | None = Field(None, description="the agent that owns them (strataflow agent)")
    run_id: Id | None = Field(None, description="the conversation (strataflow conversation_id)")
    app_id: Id | None = Field(
        None, description="the app: stored with each memory, filterable, scopes deletes"
    )
    metadata: Metadata | None = Field(None, description="kept with each memory (or message)")
    infer: bool = Field(
        True,
        description="true: the messages go to L1 and the extract stage makes memories of them (the answer is "
        "an event, PENDING until then); false: each message's text is stored as a memory at once",
    )
    filters: AddIds | None = Field(None, description="entity ids, as the typed options send them")
    timestamp: None = Field(None, description="not supported (only null): the event time is now")
    expiration_date: None = Field(None, description="not supported (only null): memories do not expire")
    immutable: OnlyFalse | None = Field(None, description="not supported (only false or null)")
    custom_categories: list[Metadata] | None = Ignored
    custom_instructions: str | None = Ignored
    agent_custom_instructions: str | None = Ignored
    structured_data_schema: Metadata | None = Ignored
    includes: str | None = Ignored
    excludes: str | None = Ignored
    output_format: str | None = Ignored
    version: str | None = Ignored
    async_mode: bool | None = Ignored
    enable_graph: bool | None = Ignored
    org_id: str | None = Ignored
    project_id: str | None = Ignored


class ReadOptions(Strict):
    """Options of search and get_all that strataflow accepts and ignores."""

    latest_only: bool | None = Ignored
    show_expired: bool | None = Ignored
    version: str | None = Ignored
    output_format: str | None = Ignored
    org_id: str | None = Ignored
    project_id: str | None = Ignored


class Mem0Search(ReadOptions):
    """POST /v3/memories/search/."""

    query: QueryText = Field(min_length=1, description="what to look for (any language)")
    filters: Mem0Filter | None = None
    top_k: int = Field(10, ge=1, le=100, description="how many results")
    threshold: float | None = Field(None, ge=0, le=1, description="the lowest score returned")
    explain: bool = Field(False, description="give each result an explain object: why it was recalled")
    user_id: SubjectId | None = Field(None, description="as filters={'user_id': ...} (older clients)")
    agent_id: SubjectId | None = Field(None, description="as filters={'agent_id': ...} (older clients)")
    run_id: Id | None = Field(None, description="as filters={'run_id': ...} (older clients)")
    app_id: Id | None = Field(None, description="as filters={'app_id': ...} (older clients)")
    rerank: bool | None = Ignored
    keyword_search: bool | None = Ignored
    fields: list[str] | None = Ignored
    reference_date: str | int | None = Ignored


class Mem0List(ReadOptions):
    """POST /v3/memories/ (get_all; page and page_size come as query parameters)."""

    filters: Mem0Filter | None = None
    page: int | None = Field(None, ge=1, le=MAX_PAGE, description="the page (also a query parameter)")
    page_size: int | None = Field(None, ge=1, le=1000, description="memories per page (default 100)")


class Mem0Update(Strict):
    """PUT /v1/memories/{id}/."""

    text: Content | None = Field(None, description="the new text of the memory")
    metadata: Metadata | None = Field(None, description="merged into the memory's metadata")
    timestamp: None = Field(None, description="not supported (only null)")
    expiration_date: None = Field(None, description="not supported (only null): memories do not expire")


class Mem0BatchChange(Strict):
    memory_id: str = Field(max_length=40, description="the memory id")
    text: Content | None = Field(None, description="the new text")
    metadata: Metadata | None = Field(None, description="merged into the memory's metadata")


class Mem0BatchUpdate(Strict):
    """PUT /v1/batch/ (the client's batch_update): all or none."""

    memories: list[Mem0BatchChange] = Field(min_length=1, max_length=MAX_BATCH)


class Mem0BatchId(Strict):
    memory_id: str = Field(max_length=40, description="the memory id")


class Mem0BatchDelete(Strict):
    """DELETE /v1/batch/ (the client's batch_delete): all or none."""

    memories: list[Mem0BatchId] = Field(min_length=1, max_length=MAX_BATCH)


class Mem0Memory(BaseModel):
    """A memory as mem0 answers it (an L2 memory item of strataflow)."""

    id: str = Field(description="the memory item id")
    memory: str = Field(description="the memory's text (the item's content)")
    user_id: str | None
    agent_id: str | None
    run_id: str | None = Field(description="the conversation it belongs to, if one")
    app_id: str | None = None
    hash: str = Field(description="MD5 of the text")
    metadata: dict[str, Any] | None
    categories: list[str]
    immutable: bool = False
    expiration_date: str | None = None
    created_at: datetime
    updated_at: datetime


class Mem0Hit(Mem0Memory):
    score: float = Field(description="the search score, 0..1, higher is better")
    explain: Explain | None = Field(None, description="why it was recalled (only when asked: explain=true)")


class Mem0AddResult(BaseModel):
    id: str
    memory: str
    event: str = Field(description="ADD (a new memory) or NONE (the same text was already stored)")
    user_id: str | None
    agent_id: str | None
    run_id: str | None
    metadata: dict[str, Any] | None


class Mem0AddAnswer(BaseModel):
    message: str
    status: str = Field(description="PENDING (infer=true: see GET /v1/event/{event_id}/) or SUCCEEDED")
    event_id: str | None = Field(None, description="the event of an infer=true add")
    results: list[Mem0AddResult] = Field(default_factory=list)


class Mem0Page(BaseModel):
    count: int
    next: str | None
    previous: str | None
    results: list[Mem0Memory]


class Mem0Results(BaseModel):
    results: list[Mem0Hit]


class Mem0HistoryEntry(BaseModel):
    id: str
    memory_id: str
    event: str = Field(description="ADD, UPDATE or DELETE")
    old_memory: str | None
    new_memory: str | None
    input: list[dict[str, Any]] = Field(default_factory=list)
    user_id: str | None
    agent_id: str | None
    metadata: dict[str, Any] | None
    categories: list[str]
    created_at: datetime
    updated_at: datetime


class Mem0Entity(BaseModel):
    id: str
    name: str
    type: str = Field(description="user, agent, run or app")
    total_memories: int
    owner: str = Field(description="the API key's name")
    organization: str = Field(description="the namespace")
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime
    updated_at: datetime


class Mem0Entities(BaseModel):
    results: list[Mem0Entity]


class Mem0EventResult(BaseModel):
    id: str
    event: str
    memory: str
    user_id: str | None
    agent_id: str | None
    data: dict[str, Any]


class Mem0Event(BaseModel):
    id: str
    event_type: str
    status: str = Field(description="PENDING until the extract stage has read the messages, then SUCCEEDED")
    payload: dict[str, Any]
    metadata: dict[str, Any]
    results: list[Mem0EventResult]
    created_at: datetime
    updated_at: datetime
    started_at: datetime | None = None
    completed_at: datetime | None = None
    latency: float | None = None


class Mem0Done(BaseModel):
    message: str


class Mem0Ping(BaseModel):
    status: str
    message: str
    namespace: str = Field(description="the namespace the key acts in")
    org_id: str | None = None
    project_id: str | None = None
    user_email: str | None = None
