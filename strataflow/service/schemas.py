"""Request bodies and query models of the HTTP API (responses are the library's own models)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, StringConstraints

from models.messages import MessageRecord

NO_NUL = r"^[^\x00]*$"  # PostgreSQL text cannot hold NUL characters
Id = Annotated[str, StringConstraints(min_length=1, max_length=512, pattern=NO_NUL)]
Text = Annotated[str, StringConstraints(max_length=20_000, pattern=NO_NUL)]
Query = Annotated[str, StringConstraints(max_length=4_000, pattern=NO_NUL)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=NO_NUL)]
Description = Annotated[str, StringConstraints(max_length=500, pattern=NO_NUL)]
EntryType = Annotated[
    str,
    Field(
        description="a seed 003 type (user, project, feedback, reference) or a kind (fact, preference, "
        "intent, meta, status, decision, feedback, reference, observation)",
        max_length=32,
    ),
]
Agent = Annotated[
    Id | None, Field(description="the agent scope: its own entries, shared ones and the namespace's")
]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class MessagesBody(RootModel[dict[str, Any] | list[dict[str, Any]]]):
    """One canonical message (without namespace: it comes from the key) or a list of them. Each record is
    validated as the batch ingest validates it; invalid ones are quarantined."""

    model_config = ConfigDict(
        json_schema_extra={"description": __doc__, "examples": [MessageRecord.model_json_schema()]}
    )

    def records(self) -> list[dict[str, Any]]:
        return self.root if isinstance(self.root, list) else [self.root]


class ContextParams(Strict):
    subject: Id = Field(description="the user the context is about (subject_id)")
    query: Query = Field(description="the user's message or question the context is for")
    intent: str | None = Field(
        None, max_length=32, description="seed 001 task type (QC_TASK, QA_QUERY, PROTOCOL_QA, GENERAL) or a "
        "context intent (recap, fact, other); classified from the query when absent",
    )  # fmt: skip
    budget: int = Field(2000, ge=64, le=32_000, description="token budget of the whole block")
    format: Literal["text", "json"] = Field("text", description="text (a prompt block) or json (pieces)")
    agent: Agent = None
    profile: Literal["user", "work", "both", "none"] = Field(
        "none", description="inject the seed 002 user and/or work document between its markers"
    )


class MemoryCreate(Strict):
    subject: Id = Field(description="the user the entry is about")
    type: EntryType
    name: Name = Field(description="the entry's name, in any language; unique per (subject, agent)")
    content: Text = Field(min_length=1, description="the entry's text")
    description: Description = Field("", description="one line: when the entry is relevant")
    agent: Agent = None
    shared: bool = Field(False, description="let the namespace's other agents read this agent's entry")
    metadata: dict[str, Any] = Field(default_factory=dict)


class MemoryPatch(Strict):
    type: EntryType | None = None
    name: Name | None = None
    content: Text | None = Field(None, min_length=1)
    description: Description | None = None
    shared: bool | None = None
    metadata: dict[str, Any] | None = None


class MemorySearch(Strict):
    query: Query = Field(description="what to look for (any language)")
    subject: Id | None = Field(None, description="only this user's entries")
    limit: int = Field(10, ge=1, le=100)
    agent: Agent = None
    type: EntryType | None = None


class MemoryListParams(Strict):
    subject: Id | None = None
    agent: Agent = None
    type: EntryType | None = Field(None, description="a seed 003 type or a kind")
    limit: int = Field(50, ge=1, le=500)
    cursor: Annotated[str, StringConstraints(max_length=200)] | None = Field(
        None, description="next_cursor of the previous page"
    )


class ProfileBody(Strict):
    content: dict[str, Any] = Field(description="seed 002 UserMemoryContent or WorkProfileContent fields")


class ProfileStatusBody(Strict):
    status: Annotated[str, StringConstraints(to_lower=True, pattern=r"(?i)^(active|disabled)$")] = Field(
        description="active or disabled (a disabled document is left out of every context and tool answer)"
    )


class SaveInfoBody(Strict):
    subject: Id
    user_message: Text = Field(min_length=1, description="what the user said")
    assistant_message: Text | None = Field(None, description="the assistant's reply, read for context only")
    existing_info: dict[str, Any] | None = Field(None, description="what the caller already knows")


class SubjectBody(Strict):
    subject: Id


class UserContextBody(Strict):
    subject: Id
    query: Query
    agent: Agent = None
