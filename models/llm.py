"""LLM output schemas: what every model (the offline provider included) must return, per stage.

The gateway parses a completion into one of these; invalid output triggers one repair call, then fails.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationInfo,
    model_validator,
)

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
    _unsupported: int = PrivateAttr(0)

    @property
    def unsupported(self) -> int:
        """Items left out because they did not rest on the prompt's lines (see the validator)."""
        return self._unsupported

    @model_validator(mode="after")
    def rests_on_the_prompts_lines(self, info: ValidationInfo) -> ExtractionOutput:
        """With the prompt's lines as validation context ({"lines": {id: text}}), an item must cite one of
        them, and its statement must share a word (a CJK character, a number, a word of 3+ letters) with
        the lines it cites. Small models copy the instructions' example (its id, or the whole item, in
        another language than the message). An item that does not is left out, counted in `unsupported`
        and then in the stage's items_dropped, as the stage drops an item citing only context lines: the
        rest of the answer stands, and the scope moves on (a model at temperature 0 would give the same
        answer to a retry). Without context (a cached answer) nothing is checked."""
        lines = info.context.get("lines") if isinstance(info.context, dict) else None
        if lines is None or not self.items:
            return self
        kept = [item for item in self.items if _rests_on(item, lines)]
        self._unsupported = len(self.items) - len(kept)
        self.items = kept
        return self


def _rests_on(item: ExtractedItem, lines: dict[int, str]) -> bool:
    """Whether the item cites a line of the prompt and its statement shares a word with what it cites."""
    cited = [lines[i] for i in item.source_message_ids if i in lines]
    said = _words(item.statement)
    return bool(cited) and (not said or bool(said & set().union(*(_words(text) for text in cited))))


_STOP = frozenset("the and for with was are you that this have has not but from his her its our".split())


def _words(text: str) -> set[str]:
    """What a statement and its line are compared on: CJK characters, numbers, words of 3+ letters."""
    found = re.findall(r"[\u3400-\u9fff]|\d+|[^\W\d_]{3,}", text.lower())
    return {word for word in found if word not in _STOP}


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
