"""A memory read from mem0 (`strataflow import --from-mem0`): from a mem0 OSS store's vector store payload or
a mem0 platform export (the memories get_all answers), validated before it becomes a strataflow entry."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from models.messages import ID_MAX_CHARS, NO_NUL


class Mem0Memory(BaseModel):
    """One mem0 memory: its text, the ids mem0 scopes it by (user_id is the subject), its metadata and
    times. Names as mem0 writes them (`memory` in get_all answers and exports, `data` in a store payload)."""

    model_config = ConfigDict(extra="ignore", coerce_numbers_to_str=True, frozen=True)

    id: str = Field(min_length=1, max_length=ID_MAX_CHARS, pattern=NO_NUL)
    memory: str = Field(min_length=1, validation_alias=AliasChoices("memory", "data", "text", "content"))
    user_id: str = Field(min_length=1, max_length=ID_MAX_CHARS, pattern=NO_NUL)
    agent_id: str | None = Field(None, max_length=ID_MAX_CHARS, pattern=NO_NUL)
    run_id: str | None = Field(None, max_length=ID_MAX_CHARS, pattern=NO_NUL)
    app_id: str | None = Field(None, max_length=ID_MAX_CHARS, pattern=NO_NUL)
    actor_id: str | None = None
    role: str | None = None
    hash: str | None = None
    categories: list[str] | None = None
    expiration_date: str | None = None
    metadata: dict[str, Any] | None = None
    created_at: datetime | None = None  # a time without an offset is read as UTC (mem0 writes UTC)
    updated_at: datetime | None = None

    @field_validator("created_at", "updated_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value

    @field_validator("memory")
    @classmethod
    def _text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the memory's text is empty")
        if "\x00" in value:
            raise ValueError("contains a NUL character, which PostgreSQL text cannot store")
        return value

    @field_validator(
        "agent_id", "run_id", "app_id", "actor_id", "role", "hash", "expiration_date", mode="before"
    )
    @classmethod
    def _blank(cls, value: Any) -> Any:
        return None if value == "" else value


class Mem0ImportResult(BaseModel):
    """What `strataflow import --from-mem0` did: memories read, entries written new, changed (updated) or
    already there with the same text (unchanged), and memories quarantined."""

    kind: Literal["oss store", "platform export"]
    label: str = Field(description="the quarantine source of its bad memories, mem0:<file name>")
    read: int = 0
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    quarantined: int = 0
    subjects: int = 0
    problems: list[str] = Field(default_factory=list, description="the first quarantined memories' errors")
