"""LLM output schemas: what every model (the offline provider included) must return, per stage.

The gateway parses a completion into one of these; invalid output triggers one repair call, then fails.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from models.common import MemoryKind
from models.vocabulary import normalize_key

# A key as a model wrote it, normalised by the one key normaliser: currentJobTitle -> job_title.
SnakeKey = Annotated[str, AfterValidator(normalize_key)]


class ExtractedItem(BaseModel):
    """One durable memory item stated explicitly in the messages."""

    model_config = ConfigDict(extra="ignore")

    kind: MemoryKind
    key: SnakeKey = Field(description="snake_case; profile keys come from the documented vocabulary")
    value: Any = Field(
        description="JSON value: number, string (ranges stay strings like '30+'), list or object"
    )
    statement: str = Field(min_length=1, description="the user's own words, or a close paraphrase")
    category: str | None = None
    importance: int | None = Field(None, ge=0, le=100)
    confidence: float = Field(0.9, ge=0, le=1)
    approximate: bool = False
    source_message_ids: list[int] = Field(min_length=1)


class ExtractionOutput(BaseModel):
    items: list[ExtractedItem] = Field(default_factory=list)


class KeyEvent(BaseModel):
    event: str = Field(min_length=1)
    message_ids: list[int] = Field(min_length=1)


class RollupOutput(BaseModel):
    """Weekly report of one scope: a Markdown summary and its key events with their message ids."""

    summary: str = Field(min_length=1)
    key_events: list[KeyEvent] = Field(default_factory=list)


class ReflectedInsight(BaseModel):
    key: SnakeKey = Field(description="the attribute, snake_case, e.g. occupation")
    question: str = Field(min_length=1, description="e.g. What is the user's occupation?")
    statement: str = Field(min_length=1)
    confidence: float = Field(0.7, ge=0, le=1)
    evidence_item_ids: list[int] = Field(min_length=1)


class ReflectionOutput(BaseModel):
    insights: list[ReflectedInsight] = Field(default_factory=list)


class HotSummaryOutput(BaseModel):
    """Seed 001 hot memory: a compact summary of a scope's latest messages, and the typed items it found
    (seed 001 refreshHotMemory: status, decision, preference)."""

    summary: str = Field(min_length=1)
    source_message_ids: list[int] = Field(default_factory=list)
    items: list[ExtractedItem] = Field(default_factory=list)
