"""Seed 000 memory manager records: save_info, summarize and get_user_context (load_context) answers.

Field names are the seed's (memoryType, createdAt are camelCase there), so an agent built against seed 000
reads the same shapes. Profile fields are the keys of the closed vocabulary (models/vocabulary.py).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class SavedMemory(BaseModel):
    """One memory written by save_info (seed 000 saved_memories[])."""

    memoryType: str = Field(description="FACT, PREFERENCE or INTENT (other kinds upper-cased: DECISION, ...)")
    content: str = Field(description="a short statement, e.g. 年龄：30+ or annual income: about 600000")
    field: str = Field(description="the vocabulary key (age, job_title, ...) or the item's key")
    category: str | None = Field(
        None, description="immigration program (QMAS, GEP, IANG, TTPS, CIES, TECHTAS)"
    )
    importance: int = Field(description="70 FACT, 60 PREFERENCE, 80 INTENT by default")


class SaveInfoResult(BaseModel):
    """Seed 000 save_info output: what was extracted, what was saved, which fields were skipped."""

    extracted_info: dict[str, Any] = Field(
        description="field -> value the exchange states (existing_info left out)"
    )
    saved_count: int
    saved_memories: list[SavedMemory] = Field(default_factory=list)
    skipped_fields: list[str] = Field(
        default_factory=list,
        description="already known: in existing_info with the same value, or already stored",
    )
    actions: dict[str, str] = Field(default_factory=dict, description="field -> what the L2 store did")
    llm_calls: int = Field(0, description="requests sent to the model (0 when the cache answered)")


class Completeness(BaseModel):
    score: int = Field(ge=0, le=100, description="share of the vocabulary's profile fields that are filled")
    filled_fields: list[str]
    missing_fields: list[str]


class UserProfile(BaseModel):
    """The four seed 000 sections; keys are vocabulary keys."""

    basic: dict[str, Any] = Field(default_factory=dict)
    career: dict[str, Any] = Field(default_factory=dict)
    immigration: dict[str, Any] = Field(default_factory=dict)
    family: dict[str, Any] = Field(default_factory=dict)


class ProfileSummary(BaseModel):
    """Seed 000 summarize output."""

    user_profile: UserProfile
    completeness: Completeness
    narrative_summary: str = Field(description="one paragraph, in the subject's language (zh or en)")
    language: str = Field(description="zh or en: the language of the subject's own statements")


class ContextMemory(BaseModel):
    """One memory of get_user_context (seed 000 load_context memories[])."""

    id: int
    type: str = Field(description="FACT, PREFERENCE, INTENT, or the upper-cased kind")
    content: str
    importance: int
    category: str | None = None
    createdAt: str | None = Field(None, description="YYYY-MM-DD the memory became true")
    field: str


class UserContext(BaseModel):
    """Seed 000 load_context output."""

    memories: list[ContextMemory]
    user_profile_summary: str | None = Field(
        None, description="the narrative, when 3+ profile fields are known"
    )
    total_memories: int
