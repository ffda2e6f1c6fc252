"""What a mem0 memory is named and shown with: its entry name (its text), the text mem0 shows, and its
metadata (the caller's, with the run and app kept under keys of their own and shown as fields)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from strataflow.adapters.mem0_filters import APP_KEY, CONVERSATION_KEY
from strataflow.memory.item_fields import MAX_NAME_CHARS

HIDDEN_KEYS = (CONVERSATION_KEY, APP_KEY)  # mem0's entity ids, shown as fields rather than metadata


def mem0_entry_name(text_: str) -> str:
    """The entry name of a mem0 memory's text: the text itself, or its start and a hash when too long."""
    text_ = " ".join(text_.split())
    if len(text_) <= MAX_NAME_CHARS:
        return text_
    digest = hashlib.sha256(text_.encode()).hexdigest()[:12]
    return f"{text_[: MAX_NAME_CHARS - 16].rstrip()} … {digest}"


def mem0_text(content: str, statement: str | None, source: str) -> str:
    """What mem0 shows as a memory: its text as written, or, for an extracted item (whose value may be a
    bare "Lisbon"), the statement it rests on, a sentence."""
    if source == "extracted" and statement and statement.strip():
        return statement
    return content


def mem0_metadata(
    metadata: Mapping[str, Any] | None, run_id: str | None, app_id: str | None
) -> dict[str, Any]:
    """The metadata a mem0 memory is stored with: the caller's, and its run and app when given."""
    stored = {k: v for k, v in (metadata or {}).items() if k not in HIDDEN_KEYS}
    if run_id is not None:
        stored[CONVERSATION_KEY] = run_id
    if app_id is not None:
        stored[APP_KEY] = app_id
    return stored


def shown_metadata(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """The metadata mem0 shows: the stored one without the entity ids (run and app are fields)."""
    shown = {k: v for k, v in metadata.items() if k not in HIDDEN_KEYS}
    return shown or None


def app_of(metadata: Mapping[str, Any]) -> str | None:
    found = metadata.get(APP_KEY)
    return found if isinstance(found, str) else None
