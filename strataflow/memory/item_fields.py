"""The fields of an L2 memory item, apart from storage: what a type, name, description, content and list
cursor may hold, how a type becomes a kind and a name a key, and how a row of memory_items (or of its
versions) reads as the one row type (models.memory_items).

strataflow.memory.api runs the operations in the caller's transaction; this module does no database access. A
value it refuses raises MemoryFieldError (a ValueError), which names the field.

- Type: a seed 003 type (user -> fact, project -> meta, feedback, reference), kept as given beside the
  internal kind, or any kind of the one enum (models.common.MemoryKind).
- Key: derived from the name, stable and unique per (subject, agent): a name that is already a snake_case key
  is the key (``job_title``); any other name becomes its ASCII words plus a hash of the whole normalised name
  (``用户偏好-简洁风格`` -> ``entry_3f2a9c01d4``), so two different names never share a key.
- Content: a text value is the content; otherwise the statement (or the value as text). A text value is also
  its own statement unless one is given; any other value reads ``key words: value``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any

from models import vocabulary
from models.common import MemoryKind
from models.memory_items import MemoryHit, MemoryItem, MemoryVersion
from models.vocabulary import SNAKE_KEY
from strataflow.hashes import content_hash

SEED_003_TYPES = {"user": "fact", "project": "meta", "feedback": "feedback", "reference": "reference"}
MAX_NAME_CHARS = 255  # seed 003: name VARCHAR(255)
MAX_DESCRIPTION_CHARS = 500  # seed 003: description VARCHAR(500)
MAX_CONTENT_CHARS = 20_000
# Kinds only the pipeline writes (the hot summary the context injects first): no surface accepts them.
INTERNAL_KINDS = frozenset({MemoryKind.hot_summary.value})
CURSOR = re.compile(r"^[1-9][0-9]{0,17}$")  # an item id below 10^18 (within bigint)


class MemoryFieldError(ValueError):
    """A field value the library refuses; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def normalize_kind(kind: str) -> str:
    """A MemoryKind value from a kind or a seed 003 type (user, project, feedback, reference)."""
    return resolve_type(kind)[0]


def resolve_type(entry_type: str) -> tuple[str, str | None]:
    """(kind, seed type or None) of a seed 003 type or a kind; MemoryFieldError (field type) otherwise. An
    internal kind (hot_summary: the pipeline's own) is refused like an unknown one."""
    name = entry_type.strip().lower()
    try:
        kind = MemoryKind(SEED_003_TYPES.get(name, name)).value
        if kind in INTERNAL_KINDS:
            raise ValueError(kind)
        return kind, name if name in SEED_003_TYPES else None
    except ValueError:
        allowed = ", ".join(k.value for k in MemoryKind if k.value not in INTERNAL_KINDS)
        raise MemoryFieldError(
            "type", f"memory kind {entry_type!r} is not one of {allowed} (or user, project)"
        ) from None


def normalize_key(key: str) -> str:
    """snake_case key: 'Job Title' -> job_title, 'currentJobTitle' -> job_title (models.vocabulary's one
    normaliser); MemoryFieldError (field key) when nothing is left."""
    try:
        return vocabulary.normalize_key(key)
    except ValueError as exc:
        raise MemoryFieldError("key", str(exc)) from None


def name_key(name: str) -> str:
    """The key of a name: the name itself when it is a snake_case key, else its ASCII words + a hash."""
    normal = " ".join(unicodedata.normalize("NFKC", name).casefold().split())
    if SNAKE_KEY.match(normal) and len(normal) <= 64:
        return normal
    slug = re.sub(r"[^a-z0-9]+", "_", normal).strip("_")[:40]
    if not slug[:1].isalpha():
        slug = "entry" + (f"_{slug}" if slug else "")
    return f"{slug}_{content_hash(normal)[:10]}"


def checked_fields(name: str, content: str, description: str) -> tuple[str, str, str]:
    """(name, content, description) with name and description stripped; MemoryFieldError for an empty name
    or content, a value over its limit, or a NUL character."""
    name, description = name.strip(), description.strip()
    for field, value, limit in (
        ("name", name, MAX_NAME_CHARS),
        ("content", content, MAX_CONTENT_CHARS),
        ("description", description, MAX_DESCRIPTION_CHARS),
    ):
        if field != "description" and not value.strip():
            raise MemoryFieldError(field, f"memory {field} is empty")
        if len(value) > limit:
            raise MemoryFieldError(
                field, f"memory {field} has {len(value)} characters, over the limit of {limit}"
            )
        if "\x00" in value:
            raise MemoryFieldError(field, f"memory {field} contains a NUL character, which cannot be stored")
    return name, content, description


def checked_importance(importance: int | None) -> int | None:
    if importance is not None and not 0 <= importance <= 100:
        raise MemoryFieldError("importance", f"importance must be 0-100, got {importance}")
    return importance


def checked_limit(limit: int, most: int) -> int:
    if not 1 <= limit <= most:
        raise MemoryFieldError("limit", f"limit must be between 1 and {most}, got {limit}")
    return limit


def default_statement(key: str, value: Any) -> str:
    """The statement of a value given without one: a text value is its own, any other reads `key: value`."""
    return value if isinstance(value, str) else f"{key.replace('_', ' ')}: {value}"


def content_of(value: Any, statement: str | None) -> str:
    """The content of an item (or of one of its versions): a text value, else the statement."""
    if isinstance(value, str):
        return value
    return statement if statement else ("" if value is None else str(value))


def item_of(row: Mapping[Any, Any]) -> MemoryItem:
    """A row of api.ITEM_COLUMNS as the one row type (an extracted item too: its key is the name, its kind
    the type)."""
    return MemoryItem(**_item_fields(row))


def hit_of(row: Mapping[Any, Any], score: float) -> MemoryHit:
    """A row of api.ITEM_COLUMNS as a search hit with its score (rounded to 6 places)."""
    return MemoryHit(**_item_fields(row), score=round(score, 6))


def _item_fields(row: Mapping[Any, Any]) -> dict[str, Any]:
    return {
        "id": row["item_id"], "subject": row["subject_id"], "agent": row["agent_id"],
        "shared": bool(row["is_shared"]), "type": row["entry_type"] or row["kind"], "kind": row["kind"],
        "name": row["name"] or row["key"], "description": row["description"] or "",
        "content": content_of(row["value"], row["statement"]), "key": row["key"], "value": row["value"],
        "statement": row["statement"], "category": row["category"], "importance": row["importance"],
        "confidence": row["confidence"], "metadata": row["metadata"] or {}, "version": row["version"],
        "status": row["status"], "source": row["source"],
        "source_message_ids": list(row["source_message_ids"] or []), "valid_from": row["valid_from"],
        "recorded_at": row["recorded_at"], "created_at": row["created_at"], "updated_at": row["updated_at"],
    }  # fmt: skip


def version_of(row: Mapping[Any, Any]) -> MemoryVersion:
    """A row of api.SELECT_HISTORY as a MemoryVersion."""
    return MemoryVersion(
        version=row["version"], action=row["action"], type=row["entry_type"] or row["kind"], kind=row["kind"],
        key=row["key"], name=row["name"] or row["key"], description=row["description"] or "",
        content=content_of(row["value"], row["statement"]), value=row["value"], statement=row["statement"],
        category=row["category"], importance=row["importance"], confidence=row["confidence"],
        agent=row["agent_id"], shared=bool(row["is_shared"]), status=row["status"], source=row["source"],
        valid_from=row["valid_from"], valid_to=row["valid_to"], recorded_at=row["recorded_at"],
        superseded_at=row["superseded_at"], run_id=row["run_id"], model=row["model"], note=row["note"],
        metadata=row.get("metadata"),
    )  # fmt: skip


def encode_cursor(item_id: int) -> str:
    """The next_cursor of a page that ends at item_id: the id, in decimal (the next page starts below it)."""
    return str(item_id)


def decode_cursor(cursor: str | None) -> int | None:
    """The item id a cursor from encode_cursor stands for (None for no cursor); MemoryFieldError otherwise."""
    if not cursor:
        return None
    if CURSOR.match(cursor):
        return int(cursor)
    raise MemoryFieldError("cursor", "cursor is not one this API returned; pass next_cursor as it came back")
