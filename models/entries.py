"""Seed 003 memory entries as strataflow.memory.entries returns them and the service sends them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class Entry(BaseModel):
    """A seed 003 memory entry (MemoryEntry), with the strataflow fields beside it."""

    id: int = Field(description="the memory item id (memory_items.item_id)")
    subject: str = Field(description="the user the entry is about (subject_id)")
    agent: str | None = Field(description="the agent that owns it; null: the whole namespace")
    shared: bool = Field(description="an agent's entry that the other agents of the namespace may read")
    type: str = Field(
        description="the seed 003 type as given (user, project, feedback, reference), else the kind"
    )
    kind: str = Field(description="the internal kind (user -> fact, project -> meta)")
    name: str = Field(description="the entry's name, in any language (the key for extracted items)")
    description: str = Field(description="one line: when the entry is relevant")
    content: str = Field(description="the entry's text")
    key: str = Field(description="the snake_case key derived from the name, unique per scope")
    metadata: dict[str, Any]
    version: int = Field(description="1 for a new entry, + 1 for every change")
    status: str = Field(description="active or deleted")
    source: str = Field(description="manual (saved through the API) or extracted (by the nightly LLM stage)")
    created_at: datetime
    updated_at: datetime


class EntryHit(Entry):
    score: float = Field(description="the search score, higher is better")


class EntryPage(BaseModel):
    entries: list[Entry]
    next_cursor: str | None = Field(description="pass as cursor for the next page; null on the last page")


class EntryVersion(BaseModel):
    """One version of an entry (memory_item_versions)."""

    version: int
    action: str = Field(description="new, content_modified, modified or deleted")
    type: str
    kind: str
    key: str
    name: str
    description: str
    content: str
    status: str
    source: str
    valid_from: datetime = Field(description="event time from which the version held")
    valid_to: datetime | None = Field(description="event time at which a later version replaced it")
    recorded_at: datetime = Field(description="when strataflow recorded the version")
    superseded_at: datetime | None = Field(description="when a later version was recorded")
    note: str | None
