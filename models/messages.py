"""The canonical input message: one pydantic model decides what a valid L1 message is.

JSONL keys (and what a column mapping maps CSV/Parquet/SQL columns to): conversation_id, subject_id,
source_message_id, role, content, created_at, and optionally namespace, source, agent_id, lang, metadata.

Validation needs two run settings, passed as the pydantic validation context (see `validation_context`):
`tz` (naive created_at values are read in it) and `max_content_chars`.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import BaseModel, ConfigDict, Field, StrictStr, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from models.common import Role

# pydantic error type -> the short machine-readable quarantine reason.
REASONS = {
    "missing": "missing_field",
    "enum": "unknown_role",
    "datetime_parsing": "bad_timestamp",
    "datetime_from_date_parsing": "bad_timestamp",
    "datetime_type": "bad_timestamp",
    "datetime_object_invalid": "bad_timestamp",
    "empty_content": "empty_content",
    "content_too_long": "content_too_long",
    "string_too_short": "empty_value",
    "string_too_long": "value_too_long",
    "nul_character": "nul_character",
    "string_pattern_mismatch": "nul_character",
    "timestamp_out_of_range": "bad_timestamp",
}
ID_MAX_CHARS = 512
NO_NUL = r"^[^\x00]*$"  # PostgreSQL text cannot hold NUL characters
# What the agent service accepts as a subject (or agent) id at every write: no '/' (a profile path could not
# address it) and no control or line-break character (it could not be shown on one line).
SAFE_ID = r"^[^/\x00-\x1f\x7f-\x9f\u2028\u2029]+$"
UNSAFE_ID_CHAR = re.compile(r"[/\x00-\x1f\x7f-\x9f\u2028\u2029]")
MIN_YEAR, MAX_YEAR = 1970, 2200  # event times outside are data errors (and would create absurd partitions)


class MessageRecord(BaseModel):
    """One conversation message as it arrives, before enrichment.

    Empty strings in optional fields count as absent (the ingest treats "" like None); checks run in
    pydantic-core where possible, because this model validates every ingested record.
    """

    model_config = ConfigDict(extra="ignore", coerce_numbers_to_str=True, frozen=True)

    conversation_id: str = Field(min_length=1, max_length=ID_MAX_CHARS, pattern=NO_NUL)
    subject_id: str = Field(min_length=1, max_length=ID_MAX_CHARS, pattern=NO_NUL)
    source_message_id: str = Field(min_length=1, max_length=ID_MAX_CHARS, pattern=NO_NUL)
    role: Role
    content: StrictStr  # ids may be numbers (coerced to text); content must be text
    created_at: datetime
    namespace: str | None = Field(None, max_length=ID_MAX_CHARS, pattern=NO_NUL)
    source: str | None = Field(None, max_length=ID_MAX_CHARS, pattern=NO_NUL)
    agent_id: str | None = Field(None, max_length=ID_MAX_CHARS, pattern=NO_NUL)
    lang: str | None = Field(None, max_length=16, pattern=NO_NUL)
    metadata: dict[str, Any] | None = None

    @field_validator("content")
    @classmethod
    def _content_size(cls, value: str, info: ValidationInfo) -> str:
        if not value or value.isspace():
            raise PydanticCustomError("empty_content", "content is empty")
        if "\x00" in value:
            raise PydanticCustomError(
                "nul_character", "contains a NUL character, which PostgreSQL text cannot store"
            )
        limit = (info.context or {}).get("max_content_chars")
        if limit is not None and len(value) > limit:
            raise PydanticCustomError(
                "content_too_long",
                "content has {length} characters, over the limit of {limit} (STRATAFLOW_MAX_CONTENT_CHARS)",
                {"length": len(value), "limit": limit},
            )
        return value

    @field_validator("created_at")
    @classmethod
    def _aware(cls, value: datetime, info: ValidationInfo) -> datetime:
        if not MIN_YEAR <= value.year <= MAX_YEAR:
            raise PydanticCustomError(
                "timestamp_out_of_range",
                "year {year} is outside {low}-{high}",
                {"year": value.year, "low": MIN_YEAR, "high": MAX_YEAR},
            )
        if value.tzinfo is None:
            tz = (info.context or {}).get("tz") or ZoneInfo("UTC")
            return value.replace(tzinfo=tz)
        return value


def validation_context(tz: ZoneInfo, max_content_chars: int) -> dict[str, Any]:
    """The context MessageRecord.model_validate needs: the run's time zone and content size limit."""
    return {"tz": tz, "max_content_chars": max_content_chars}


# A validated record as a plain tuple (what the ingest reads from a MessageRecord): conversation_id,
# subject_id, source_message_id, role, content, created_at, namespace, source, agent_id, lang, metadata.
RecordFields = tuple[
    str, str, str, Role, str, datetime, str | None, str | None, str | None, str | None, dict[str, Any] | None
]
# The one time layout the fast path reads itself; pydantic reads every other layout it accepts.
CANONICAL_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|[+-]\d{2}:\d{2})?")
ROLES: dict[str, Role] = {role.value: role for role in Role}


def record_fields(record: MessageRecord) -> RecordFields:
    """A validated MessageRecord as RecordFields."""
    return (
        record.conversation_id,
        record.subject_id,
        record.source_message_id,
        record.role,
        record.content,
        record.created_at,
        record.namespace,
        record.source,
        record.agent_id,
        record.lang,
        record.metadata,
    )


def canonical_fields(value: dict[str, Any], tz: ZoneInfo, max_content_chars: int) -> RecordFields | None:
    """MessageRecord's result for a record that is already canonical, without pydantic; else None.

    Accepts only what the model accepts unchanged: ids as non-empty text (or plain ints, which the model
    turns into text), a known role, non-blank content within the limit, created_at as a datetime or as ISO
    text (YYYY-MM-DD[T ]HH:MM:SS[.ffffff][Z|+HH:MM]) between MIN_YEAR and MAX_YEAR, optional fields as text
    or null, metadata as an object with text keys, and no NUL anywhere the model forbids one. Anything
    else returns None, and the caller validates the record with the model, which gives the same result or
    the error to quarantine. tests/ingest/test_fast_path.py holds the two to the same answers.
    """
    get = value.get
    conversation_id, subject_id, message_id = (
        get("conversation_id"),
        get("subject_id"),
        get("source_message_id"),
    )
    role, content = get("role"), get("content")
    if not (
        type(conversation_id) is str
        and type(subject_id) is str
        and type(message_id) is str
        and 0 < len(conversation_id) <= ID_MAX_CHARS
        and 0 < len(subject_id) <= ID_MAX_CHARS
        and 0 < len(message_id) <= ID_MAX_CHARS
        and "\x00" not in conversation_id
        and "\x00" not in subject_id
        and "\x00" not in message_id
    ):
        conversation_id, subject_id, message_id = (
            _canonical_id(conversation_id),
            _canonical_id(subject_id),
            _canonical_id(message_id),
        )
        if conversation_id is None or subject_id is None or message_id is None:
            return None
    if (
        type(role) is not str
        or role not in ROLES
        or type(content) is not str
        or not content
        or content.isspace()
        or "\x00" in content
        or len(content) > max_content_chars
    ):
        return None
    created_at = _canonical_time(get("created_at"), tz)
    namespace, source, agent_id, lang = get("namespace"), get("source"), get("agent_id"), get("lang")
    metadata = get("metadata")
    if (
        created_at is None
        or not _optional_text(namespace, ID_MAX_CHARS)
        or not _optional_text(source, ID_MAX_CHARS)
        or not _optional_text(agent_id, ID_MAX_CHARS)
        or not _optional_text(lang, 16)
        or metadata is not None
        and not _text_keyed_dict(metadata)
    ):
        return None
    return (
        conversation_id,
        subject_id,
        message_id,
        ROLES[role],
        content,
        created_at,
        namespace,
        source,
        agent_id,
        lang,
        metadata,
    )


def _canonical_id(value: Any) -> str | None:
    """An id as the model keeps it (text, or a plain int as text), or None when the model must decide."""
    if type(value) is int:
        value = str(value)
    if type(value) is str and 0 < len(value) <= ID_MAX_CHARS and "\x00" not in value:
        return value
    return None


def _optional_text(value: Any, limit: int) -> bool:
    return value is None or type(value) is str and len(value) <= limit and "\x00" not in value


def _text_keyed_dict(value: Any) -> bool:
    if type(value) is not dict:
        return False
    for key in value:
        if type(key) is not str:
            return False
    return True


def _canonical_time(value: Any, tz: ZoneInfo) -> datetime | None:
    moment: datetime
    if type(value) is str:
        if not CANONICAL_TIME.fullmatch(value):
            return None
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            return None
    elif type(value) is datetime:
        moment = value
    else:
        return None
    if not MIN_YEAR <= moment.year <= MAX_YEAR:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=tz)


class RecordProblem(BaseModel):
    """Why a record is not a valid message: the field it names, a short reason and a readable sentence."""

    field: str | None
    reason: str
    error: str


def describe_errors(exc: ValidationError) -> RecordProblem:
    """The first error as a RecordProblem; the sentence lists every field that failed."""
    parts = []
    first_field, first_reason = None, "invalid_record"
    for index, error in enumerate(exc.errors(include_url=False)):
        field = ".".join(str(part) for part in error["loc"]) or None
        reason = REASONS.get(error["type"], "wrong_type" if error["type"].endswith("_type") else "bad_value")
        if error["type"] == "enum" and field != "role":
            reason = "bad_value"
        if index == 0:
            first_field, first_reason = field, reason
        if error["type"] == "string_pattern_mismatch":
            parts.append(f"field '{field}' contains a NUL character, which PostgreSQL text cannot store")
        elif error["type"] == "missing":
            parts.append(f"field '{field}' is missing")
        else:
            shown = repr(error.get("input"))
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            parts.append(f"field '{field}': {error['msg']} (got {shown})")
    return RecordProblem(field=first_field, reason=first_reason, error="; ".join(parts))
