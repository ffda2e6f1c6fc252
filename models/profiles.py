"""Seed 002 profile documents: the user and work content models, exactly as the seed writes them.

Every owner (a subject of a namespace) has one user document (`UserMemoryContent`, read by router-type
agents) and one work document (`WorkProfileContent`, read by worker-type agents). Entries of the lists
(people, places, recurring routines, current projects, team members) keep field-level provenance in `meta`
{source, confidence, last_updated_at}. Unknown fields are refused (`extra="forbid"`), so a PUT or PATCH with a
misspelled field fails naming it instead of being dropped silently.
"""

from __future__ import annotations

from datetime import date, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

HHMM = r"^([01]\d|2[0-3]):[0-5]\d$"


class MemoryType(StrEnum):
    """Seed 002 MemoryType: which document."""

    USER = "user"
    WORK = "work"


class MemoryStatus(StrEnum):
    """Seed 002 MemoryStatus: a DISABLED document is kept up to date but left out of contexts and tools."""

    ACTIVE = "active"
    DISABLED = "disabled"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EntryMeta(_Strict):
    """Field-level provenance of one entry: extracted (from L2) or manual (a PUT/PATCH), with confidence."""

    source: str | None = Field(None, description="extracted or manual (seed 002 memory_source)")
    confidence: float = Field(1.0, ge=0, le=1)
    last_updated_at: datetime | None = None


class TimeWindow(_Strict):
    weekdays: list[int | str] = Field(default_factory=list, description="0-6 (Monday 0) or mon..sun")
    start: str = Field(pattern=HHMM, description="HH:MM")
    end: str = Field(pattern=HHMM, description="HH:MM")


class Person(_Strict):
    name: str = Field(min_length=1)
    relationship: str | None = None
    role: str | None = None
    preferred_contact_channel: str | None = None
    notes: str | None = None
    meta: EntryMeta = Field(default_factory=EntryMeta)


class Place(_Strict):
    name: str = Field(min_length=1)
    category: str | None = None
    address: str | None = None
    timezone: str | None = None
    commute_minutes: int | None = Field(None, ge=0)
    preference: Literal["like", "neutral", "avoid"] | None = None
    notes: str | None = None
    meta: EntryMeta = Field(default_factory=EntryMeta)


class Preferences(_Strict):
    communication_style: str | None = None
    language_preference: list[str] = Field(default_factory=list)
    location_preference: str | None = None
    work_lifestyle: str | None = None
    notification_preference: list[str] = Field(default_factory=list)


class SchedulingPreferences(_Strict):
    productive_windows: list[TimeWindow] = Field(default_factory=list)
    preferred_meeting_windows: list[TimeWindow] = Field(default_factory=list)
    no_meeting_windows: list[TimeWindow] = Field(default_factory=list)
    deep_work_windows: list[TimeWindow] = Field(default_factory=list)
    preferred_meeting_duration_minutes: list[int] = Field(default_factory=lambda: [30, 60])
    meeting_buffer_minutes: int | None = Field(None, ge=0)
    max_meetings_per_day: int | None = Field(None, ge=0)
    notes: str | None = None


class RecurringRoutine(_Strict):
    name: str = Field(min_length=1)
    description: str | None = None
    cadence: str | None = None
    time_windows: list[TimeWindow] = Field(default_factory=list)
    importance: str | None = None
    meta: EntryMeta = Field(default_factory=EntryMeta)


class UserMemoryContent(_Strict):
    """Seed 002 UserMemoryContent: personal preferences, habits, relationships and places (router agents)."""

    occupation: str | None = None
    timezone: str | None = None
    primary_language: str | None = None
    people: list[Person] = Field(default_factory=list)
    places: list[Place] = Field(default_factory=list)
    preferences: Preferences = Field(default_factory=Preferences)
    scheduling_preferences: SchedulingPreferences = Field(default_factory=SchedulingPreferences)
    interests: list[str] = Field(default_factory=list)
    avoid_topics: list[str] = Field(default_factory=list)
    custom_rules: list[str] = Field(default_factory=list)
    recurring_routines: list[RecurringRoutine] = Field(default_factory=list)


class Milestone(_Strict):
    name: str = Field(min_length=1)
    due_date: date | None = None
    status: str | None = None
    notes: str | None = None


class Project(_Strict):
    name: str = Field(min_length=1)
    description: str | None = None
    status: Literal["planned", "active", "paused", "completed"] | None = None
    priority: str | None = None
    deadline: date | None = None
    collaborators: list[str] = Field(default_factory=list)
    key_milestones: list[Milestone] = Field(default_factory=list)
    notes: str | None = None
    meta: EntryMeta = Field(default_factory=EntryMeta)


class WorkHabits(_Strict):
    available_hours: list[TimeWindow] = Field(default_factory=list)
    deep_work_blocks: list[TimeWindow] = Field(default_factory=list)
    preferred_meeting_windows: list[TimeWindow] = Field(default_factory=list)
    no_meeting_windows: list[TimeWindow] = Field(default_factory=list)
    preferred_meeting_duration_minutes: list[int] = Field(default_factory=lambda: [30, 60])
    notification_channel: str | None = None
    notes: str | None = None


class TeamMember(_Strict):
    name: str = Field(min_length=1)
    role: str | None = None
    relationship: str | None = None
    preferred_contact_channel: str | None = None
    notes: str | None = None
    meta: EntryMeta = Field(default_factory=EntryMeta)


class WorkProfileContent(_Strict):
    """Seed 002 WorkProfileContent: projects, team, habits and rules at work (worker agents)."""

    occupation: str | None = None
    expertise: list[str] = Field(default_factory=list)
    preferred_tools: list[str] = Field(default_factory=list)
    current_projects: list[Project] = Field(default_factory=list)
    work_habits: WorkHabits = Field(default_factory=WorkHabits)
    team_members: list[TeamMember] = Field(default_factory=list)
    team_context: str | None = None
    work_rules: list[str] = Field(default_factory=list)


CONTENT_MODELS: dict[str, type[UserMemoryContent] | type[WorkProfileContent]] = {
    MemoryType.USER.value: UserMemoryContent,
    MemoryType.WORK.value: WorkProfileContent,
}
# The lists whose entries carry a name and meta; a PUT/PATCH compares and protects them entry by entry.
ENTRY_FIELDS: dict[str, tuple[str, ...]] = {
    MemoryType.USER.value: ("people", "places", "recurring_routines"),
    MemoryType.WORK.value: ("current_projects", "team_members"),
}
# The object fields; a PATCH merges into them and protects them sub-field by sub-field.
OBJECT_FIELDS: dict[str, tuple[str, ...]] = {
    MemoryType.USER.value: ("preferences", "scheduling_preferences"),
    MemoryType.WORK.value: ("work_habits",),
}


class ProfileDocument(BaseModel):
    """One owner's user or work document as the library returns it (the service answers {"content": ...})."""

    namespace: str
    subject_id: str
    doc_type: Literal["user", "work"]
    status: Literal["active", "disabled"] = Field(description="seed 002 MemoryStatus value")
    version: int = Field(description="+1 on every change of the stored document; 0 before the first write")
    updated_at: datetime | None = None
    content: dict[str, Any] = Field(description="UserMemoryContent or WorkProfileContent, as JSON")
