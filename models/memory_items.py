"""The one row type of L2 memory (strataflow.memory.api) as every surface sends it: the CLI, HTTP, MCP and
the adapters. A memory item read as a seed 003 entry (id, name, type, description, content) with the item's
own fields beside it (kind, key, value, statement, importance, lineage, times)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class MemoryItem(BaseModel):
    """One L2 memory item (memory_items): a seed 003 entry (MemoryEntry) with the strataflow fields."""

    id: int = Field(description="the memory item id (memory_items.item_id)")
    subject: str = Field(description="the user the item is about (subject_id)")
    agent: str | None = Field(description="the agent that owns it; null: the whole namespace")
    shared: bool = Field(description="an agent's item that the other agents of the namespace may read")
    type: str = Field(
        description="the seed 003 type as given (user, project, feedback, reference), else the kind"
    )
    kind: str = Field(description="the internal kind (user -> fact, project -> meta)")
    name: str = Field(description="the item's name, in any language (the key when it was given none)")
    description: str = Field(description="one line: when the item is relevant")
    content: str = Field(description="the item's text: a text value, else the statement")
    key: str = Field(description="the snake_case key derived from the name, unique per (subject, agent)")
    value: Any = Field(description="the value as stored (JSON: text, number, list, object)")
    statement: str | None = Field(description="the statement the value rests on, in the user's words")
    category: str | None = Field(description="basic, career, immigration, family, ... (extraction's)")
    importance: int = Field(description="0-100")
    confidence: float = Field(description="0-1")
    metadata: dict[str, Any]
    version: int = Field(description="1 for a new item, + 1 for every change")
    status: str = Field(description="active or deleted")
    source: str = Field(description="manual (written through the API) or extracted (by the LLM stage)")
    source_message_ids: list[int] = Field(description="the L1 messages the item came from (lineage)")
    valid_from: datetime = Field(description="event time from which the current version holds")
    recorded_at: datetime = Field(description="when strataflow recorded the current version")
    created_at: datetime
    updated_at: datetime


class Explain(BaseModel):
    """Why a hit was recalled: its score's logit z in parts (strataflow.retrieval.ranking); the parts add up
    to z and 1 / (1 + e^-z) is the score."""

    parts: dict[str, float] = Field(
        description="each signal's contribution in logit units: dense, neighbours, subject, cross_check "
        "(across languages, at most 0), lexical, speaker, time, period, lineage, boost_cap (a cap shows as "
        "its own negative part)"
    )
    logit: float = Field(description="z, the sum of the parts; the score is 1 / (1 + e^-z)")
    uncalibrated: str | None = Field(
        None,
        description="set when the row's embedding model has no calibration: it is scored as the default "
        "model's cosine, so a threshold means less on it (docs/retrieval.md, Scores)",
    )

    @classmethod
    def of(cls, parts: dict[str, float], uncalibrated: str | None = None) -> Explain:
        """The explanation of a row whose logit has these parts (rounded to 4 places, as the score)."""
        return cls(
            parts={k: round(float(v), 4) for k, v in parts.items()},
            logit=round(sum(parts.values()), 4),
            uncalibrated=uncalibrated,
        )


class MemoryHit(MemoryItem):
    """A search hit: the item and its score under the one retrieval ranking."""

    score: float = Field(description="the search score, higher is better")
    explain: Explain | None = Field(None, description="why it was recalled (only when asked: explain=true)")


class MemoryPage(BaseModel):
    """One page of a list, newest first."""

    entries: list[MemoryItem]
    next_cursor: str | None = Field(description="pass as cursor for the next page; null on the last page")


class MemoryVersion(BaseModel):
    """One version of an item (memory_item_versions), oldest first in a history."""

    version: int
    action: str = Field(
        description="new, content_modified, modified, deleted (or, kept only in history, a value that did "
        "not become current: see note)"
    )
    type: str
    kind: str
    key: str
    name: str
    description: str
    content: str
    value: Any
    statement: str | None
    category: str | None
    importance: int | None
    confidence: float | None
    agent: str | None
    shared: bool
    status: str
    source: str
    valid_from: datetime = Field(description="event time from which the version held")
    valid_to: datetime | None = Field(description="event time at which a later version replaced it")
    recorded_at: datetime = Field(description="when strataflow recorded the version")
    superseded_at: datetime | None = Field(description="when a later version was recorded")
    run_id: uuid.UUID | None = Field(description="the pipeline run that wrote it (null for manual writes)")
    model: str | None
    note: str | None = Field(description="why a version was kept in history only (e.g. older event time)")
    metadata: dict[str, Any] | None = Field(
        None, description="the item's metadata as this version had it (null: recorded before it was kept)"
    )


class MemoryWrite(BaseModel):
    """What a write did (new, content_modified, modified, unchanged, deleted) and the item as it is now."""

    action: str
    item: MemoryItem
