"""Request bodies and query models of the HTTP API (responses are the library's own models).

The schemas say exactly what the service accepts, so a client (or a tool such as Schemathesis) that follows
the OpenAPI document is never refused for a value it could not have known was wrong: ids and subjects are
text without '/' or control characters (models.messages.SAFE_ID), names and contents have a non-blank
character, every string is free of NUL (PostgreSQL cannot store one), enums list their values, numbers their
bounds, and a message's `created_at` lies inside the online write window (its pattern is the window's days,
made when the document is served: strataflow.service.openapi). The same limits are the MCP tools' (their
arguments use these constants).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, RootModel, StringConstraints, Tag
from typing_extensions import TypeAliasType

from models.messages import NO_NUL, SAFE_ID

ID_MAX = 512
NAME_MAX = 255
DESCRIPTION_MAX = 500
TEXT_MAX = 20_000
# A query is encoded by both embedding models and read by the full-text search, its cost growing with its
# length (multilingual-e5 slides its 512-token window over the whole text): 1,000 characters is about two
# windows of CJK text and well over the models' reach in English; longer is 422 naming `query` (R2).
QUERY_MAX = 1_000
BIGINT_MAX = 2**63 - 1
# A value with at least one character that is not whitespace (str.isspace), and no NUL.
NOT_BLANK = r"^[^\x00]*[^\s\x00][^\x00]*$"
# A created_at the service accepts; the served document narrows it to the days of the write window.
CREATED_AT = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,6})?)?"
    r"(Z|[+-](0[0-9]|1[0-3]):[0-5][0-9]|[+-]14:00)?$"
)

NoNul = Annotated[str, StringConstraints(pattern=NO_NUL)]
Id = Annotated[str, StringConstraints(min_length=1, max_length=ID_MAX, pattern=NO_NUL)]
SubjectId = Annotated[str, StringConstraints(min_length=1, max_length=ID_MAX, pattern=SAFE_ID)]
OptionalText = Annotated[str, StringConstraints(max_length=ID_MAX, pattern=NO_NUL)]
Text = Annotated[str, StringConstraints(max_length=TEXT_MAX, pattern=NO_NUL)]
Content = Annotated[str, StringConstraints(min_length=1, max_length=TEXT_MAX, pattern=NOT_BLANK)]
QueryText = Annotated[str, StringConstraints(max_length=QUERY_MAX, pattern=NO_NUL)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=NAME_MAX, pattern=NOT_BLANK)]
Description = Annotated[str, StringConstraints(max_length=DESCRIPTION_MAX, pattern=NO_NUL)]
# Any JSON value without a NUL character in a string or a key (a metadata object; jsonb cannot hold NUL).
JsonValue = TypeAliasType(  # type: ignore[misc]
    "JsonValue",
    Union[NoNul, int, float, bool, None, list["JsonValue"], dict[NoNul, "JsonValue"]],  # type: ignore[misc]  # noqa: UP007
)
Metadata = dict[NoNul, JsonValue]  # type: ignore[misc]
ProfileKey = Annotated[str, StringConstraints(max_length=64, pattern=r"^[a-z][a-z0-9_]*$")]
# A seed 003 type or a kind of the one enum, never an internal kind (hot_summary: the pipeline's own).
EntryTypeName = Literal[
    "user", "project", "feedback", "reference", "fact", "preference", "intent", "meta", "status", "decision",
    "observation",
]  # fmt: skip
EntryType = Annotated[
    EntryTypeName,
    Field(
        description="a seed 003 type (user, project, feedback, reference) or a kind (fact, preference, "
        "intent, meta, status, decision, feedback, reference, observation); internal kinds are refused",
    ),
]
Agent = Annotated[
    SubjectId | None,
    Field(
        description="the agent scope: its own entries, shared ones and the namespace's (a key bound to an "
        "agent acts as that agent: naming another one is 403)"
    ),
]
Intent = Literal[
    "QA_QUERY", "QC_TASK", "PROTOCOL_QA", "GENERAL", "GENERAL_CHAT", "recap", "fact", "other", "qa", "task",
    "protocol",
]  # fmt: skip
# next_cursor of a page: the id the next page starts below (at most 18 digits: within bigint).
Cursor = Annotated[str, StringConstraints(pattern=r"^[1-9][0-9]{0,17}$")]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MessageIn(Strict):
    """One canonical message (seed 001 saveConversation), without namespace: the key decides it (a record
    naming one, or any key not listed here, is refused: 422 naming it)."""

    conversation_id: Id = Field(description="the conversation the message belongs to")
    subject_id: SubjectId = Field(description="the user the message is about")
    source_message_id: Id = Field(description="the message's id in its source; a re-post is idempotent")
    role: Literal["user", "assistant", "system", "tool"]
    content: Content = Field(description="the message text")
    created_at: Annotated[str, StringConstraints(pattern=CREATED_AT)] = Field(
        description="event time, ISO 8601 (no offset: STRATAFLOW_TIMEZONE), inside the online write window "
        "[now - STRATAFLOW_API_WRITE_PAST_DAYS (the retention), now + STRATAFLOW_API_WRITE_FUTURE_DAYS]"
    )
    source: OptionalText | None = Field(None, description="where the message comes from (default: api)")
    agent_id: OptionalText | None = Field(None, description="the agent in the conversation")
    lang: Annotated[str, StringConstraints(max_length=16, pattern=NO_NUL)] | None = Field(
        None, description="language code; detected when absent"
    )
    metadata: Metadata | None = Field(None, description="any JSON object, kept with the message")

    def record(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


def _one_or_list(value: Any) -> str:
    return "list" if isinstance(value, list) else "one"


# One message or a list: the body's shape picks the branch, so an error names only that branch's field.
OneOrList = Annotated[
    Annotated[MessageIn, Tag("one")] | Annotated[list[MessageIn], Tag("list")], Discriminator(_one_or_list)
]
UNION_TAGS = frozenset({"one", "list"})


class MessagesBody(RootModel[OneOrList]):
    """One canonical message (without namespace: it comes from the key) or a list of them."""

    def records(self) -> list[dict[str, Any]]:
        found = self.root if isinstance(self.root, list) else [self.root]
        return [message.record() for message in found]


class ContextParams(Strict):
    subject: SubjectId = Field(description="the user the context is about (subject_id)")
    query: QueryText = Field(description="the user's message or question the context is for")
    intent: Intent | None = Field(
        None, description="seed 001 task type (QC_TASK, QA_QUERY, PROTOCOL_QA, GENERAL) or a context intent "
        "(recap, fact, other, qa, task, protocol); classified from the query when absent",
    )  # fmt: skip
    budget: int = Field(2000, ge=64, le=32_000, description="token budget of the whole block")
    format: Literal["text", "json"] = Field("text", description="text (a prompt block) or json (pieces)")
    agent: Agent = None
    profile: Literal["user", "work", "both", "none"] = Field(
        "none", description="inject the seed 002 user and/or work document between its markers"
    )
    threshold: float | None = Field(
        None, ge=0, le=1, description="leave out items and hits scoring below this (docs/retrieval.md)"
    )


class MemoryCreate(Strict):
    subject: SubjectId = Field(description="the user the entry is about")
    type: EntryType
    name: Name = Field(description="the entry's name, in any language; unique per (subject, agent)")
    content: Content = Field(description="the entry's text")
    description: Description = Field("", description="one line: when the entry is relevant")
    agent: Agent = None
    shared: bool = Field(False, description="let the namespace's other agents read this agent's entry")
    metadata: Metadata = Field(default_factory=dict)


class MemoryPatch(Strict):
    type: EntryType | None = None
    name: Name | None = None
    content: Content | None = None
    description: Description | None = None
    shared: bool | None = None
    metadata: Metadata | None = None


class MemorySearch(Strict):
    query: QueryText = Field(description="what to look for (any language)")
    subject: SubjectId | None = Field(None, description="only this user's entries")
    limit: int = Field(10, ge=1, le=100)
    agent: Agent = None
    type: EntryType | None = None
    threshold: float | None = Field(
        None, ge=0, le=1, description="only entries scoring at least this (0..1, docs/retrieval.md)"
    )
    explain: bool = Field(False, description="give each hit an explain object: why it was recalled")


class MemoryListParams(Strict):
    subject: SubjectId | None = None
    agent: Agent = None
    type: EntryType | None = Field(None, description="a seed 003 type or a kind")
    limit: int = Field(50, ge=1, le=500)
    cursor: Cursor | None = Field(None, description="next_cursor of the previous page")


class ProfileStatusBody(Strict):
    # Seed 002 spells them ACTIVE / DISABLED; the library answers in lower case.
    status: Literal["active", "disabled", "ACTIVE", "DISABLED"] = Field(
        description="active or disabled, either case (a disabled document is left out of every context and "
        "tool answer)"
    )


class SaveInfoBody(Strict):
    subject: SubjectId
    user_message: Content = Field(description="what the user said")
    assistant_message: Text | None = Field(None, description="the assistant's reply, read for context only")
    existing_info: dict[ProfileKey, JsonValue] | None = Field(
        None, description="what the caller already knows, by profile key (lower snake_case: age, job_title)"
    )


class SubjectBody(Strict):
    subject: SubjectId


class UserContextBody(Strict):
    subject: SubjectId
    query: QueryText
    agent: Agent = None
