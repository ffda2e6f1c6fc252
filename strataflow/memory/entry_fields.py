"""The fields of a seed 003 entry, apart from storage: what a name, type, description, content and list cursor
may hold, how a name becomes a key and a type a kind, and how a memory item reads as an Entry.

strataflow.memory.entries runs the operations (save, get, update, delete, list, search, history) in the
caller's transaction; this module does no database access. A value it refuses raises EntryFieldError, which
names the field.

- Key: derived from the name, stable and unique per scope: a name that is already a snake_case key is the key
  (``job_title``); any other name becomes its ASCII words plus a hash of the whole normalised name
  (``用户偏好-简洁风格`` -> ``entry_3f2a9c01d4``), so two different names never share a key.
- Type: the seed's (user, project, feedback, reference), kept as given beside the internal kind (user -> fact,
  project -> meta), or any kind of the one enum.
- Content: a string value is the content; otherwise the statement (or the value as text).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Any

from models.entries import Entry, EntryHit
from models.vocabulary import SNAKE_KEY
from strataflow.memory.api import SEED_003_TYPES, MemoryItem, normalize_kind

MAX_NAME_CHARS = 255  # seed 003: name VARCHAR(255)
MAX_DESCRIPTION_CHARS = 500  # seed 003: description VARCHAR(500)
MAX_CONTENT_CHARS = 20_000
CURSOR = re.compile(r"^[1-9][0-9]{0,17}$")  # an item id below 10^18 (within bigint)


class EntryFieldError(ValueError):
    """A field value the library refuses; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def entry_key(name: str) -> str:
    """The key of a name: the name itself when it is a snake_case key, else its ASCII words + a hash."""
    normal = " ".join(unicodedata.normalize("NFKC", name).casefold().split())
    if SNAKE_KEY.match(normal) and len(normal) <= 64:
        return normal
    slug = re.sub(r"[^a-z0-9]+", "_", normal).strip("_")[:40]
    if not slug[:1].isalpha():
        slug = "entry" + (f"_{slug}" if slug else "")
    return f"{slug}_{hashlib.sha256(normal.encode()).hexdigest()[:10]}"


def resolve_type(entry_type: str) -> tuple[str, str | None]:
    """(kind, seed type or None) of a seed 003 type or a kind; EntryFieldError for anything else."""
    name = entry_type.strip().lower()
    try:
        return normalize_kind(name), name if name in SEED_003_TYPES else None
    except ValueError as exc:
        raise EntryFieldError("type", str(exc)) from None


def checked_fields(name: str, content: str, description: str) -> tuple[str, str, str]:
    """(name, content, description) with name and description stripped; EntryFieldError for an empty name or
    content, a value over its limit, or a NUL character."""
    name, description = name.strip(), description.strip()
    for field, value, limit in (
        ("name", name, MAX_NAME_CHARS),
        ("content", content, MAX_CONTENT_CHARS),
        ("description", description, MAX_DESCRIPTION_CHARS),
    ):
        if field != "description" and not value.strip():
            raise EntryFieldError(field, f"entry {field} is empty")
        if len(value) > limit:
            raise EntryFieldError(
                field, f"entry {field} has {len(value)} characters, over the limit of {limit}"
            )
        if "\x00" in value:
            raise EntryFieldError(field, f"entry {field} contains a NUL character, which cannot be stored")
    return name, content, description


def entry_content(value: Any, statement: str | None) -> str:
    """The content of an item (or of one of its versions): a string value, else the statement."""
    if isinstance(value, str):
        return value
    return statement if statement else ("" if value is None else str(value))


def entry_of(item: MemoryItem) -> Entry:
    """A memory item as an entry (an extracted item too: its key is the name, its kind the type)."""
    return Entry(
        id=item.item_id, subject=item.subject_id, agent=item.agent_id, shared=item.is_shared,
        type=item.entry_type or item.kind, kind=item.kind, name=item.name or item.key,
        description=item.description or "", content=entry_content(item.value, item.statement), key=item.key,
        metadata=item.metadata, version=item.version, status=item.status, source=item.source,
        created_at=item.created_at, updated_at=item.updated_at,
    )  # fmt: skip


def hit_of(item: MemoryItem, score: float) -> EntryHit:
    """A search hit: the entry and its score (rounded to 6 places)."""
    return EntryHit(**entry_of(item).model_dump(), score=round(score, 6))


def encode_cursor(item_id: int) -> str:
    """The next_cursor of a page that ends at item_id: the id, in decimal (the next page starts below it)."""
    return str(item_id)


def decode_cursor(cursor: str | None) -> int | None:
    """The item id a cursor from encode_cursor stands for (None for no cursor); EntryFieldError otherwise."""
    if not cursor:
        return None
    if CURSOR.match(cursor):
        return int(cursor)
    raise EntryFieldError("cursor", "cursor is not one this API returned; pass next_cursor as it came back")
