"""Shapes only: strataflow's rows (models.memory_items, strataflow.memory.item_sets) as mem0's answers, and
mem0's texts as entry names. No database access and no decisions about what is stored: the routes
(strataflow.service.routes.mem0) call the one L2 API and hand its rows here.

Mapping (docs/integrations.md): user_id -> subject, agent_id -> the item's agent, run_id -> the conversation
(`metadata.conversation_id` of a memory stored with one, else the one conversation of the messages an
extracted memory came from), memory -> the item's content, categories -> [category], metadata -> the item's
metadata without the conversation field. A memory stored with infer=False is an entry of type `user` (kind
fact) whose name is its text, so the same text stored twice for a user is one memory.
"""

from __future__ import annotations

import hashlib
from typing import Any

from models.memory_items import MemoryItem, MemoryVersion
from strataflow.memory.item_fields import MAX_NAME_CHARS
from strataflow.memory.item_sets import CONVERSATION_KEY, EntityCount
from strataflow.service.mem0_schemas import Mem0Entity, Mem0HistoryEntry, Mem0Hit, Mem0Memory

ENTRY_TYPE = "user"  # the seed 003 type of a memory stored through mem0 (kind fact)
HISTORY_EVENTS = {"new": "ADD", "content_modified": "UPDATE", "modified": "UPDATE", "deleted": "DELETE"}


def entry_name(text: str) -> str:
    """The entry name of a memory's text: the text itself, or its start and a hash when it is too long."""
    text = " ".join(text.split())
    if len(text) <= MAX_NAME_CHARS:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return f"{text[: MAX_NAME_CHARS - 16].rstrip()} … {digest}"


def stored_metadata(metadata: dict[str, Any] | None, run_id: str | None) -> dict[str, Any]:
    """The metadata an entry is stored with: the caller's, and the conversation when there is one."""
    stored = dict(metadata or {})
    if run_id is not None:
        stored[CONVERSATION_KEY] = run_id
    return stored


def shown_metadata(item: MemoryItem) -> dict[str, Any] | None:
    shown = {k: v for k, v in item.metadata.items() if k != CONVERSATION_KEY}
    return shown or None


def memory_of(item: MemoryItem, run_id: str | None) -> Mem0Memory:
    return Mem0Memory(
        id=str(item.id), memory=item.content, user_id=item.subject, agent_id=item.agent, run_id=run_id,
        hash=hashlib.md5(item.content.encode()).hexdigest(), metadata=shown_metadata(item),
        categories=[item.category] if item.category else [], created_at=item.created_at,
        updated_at=item.updated_at,
    )  # fmt: skip


def hit_of(item: MemoryItem, run_id: str | None, score: float) -> Mem0Hit:
    return Mem0Hit(**memory_of(item, run_id).model_dump(), score=min(1.0, max(0.0, float(score))))


def history_of(item: MemoryItem, versions: list[MemoryVersion]) -> list[Mem0HistoryEntry]:
    """The versions that were current, oldest first, as ADD / UPDATE / DELETE events (a version kept only in
    history, e.g. an extracted value kept out of a manual item, was never the memory: left out)."""
    entries: list[Mem0HistoryEntry] = []
    previous: str | None = None
    for version in versions:
        if version.note is not None:
            continue
        event = "ADD" if not entries else HISTORY_EVENTS.get(version.action, "UPDATE")
        new = None if event == "DELETE" else version.content
        entries.append(
            Mem0HistoryEntry(
                id=f"{item.id}-{version.version}",
                memory_id=str(item.id),
                event=event,
                old_memory=previous if event != "ADD" else None,
                new_memory=new,
                user_id=item.subject,
                agent_id=version.agent,
                metadata=shown_metadata(item),
                categories=[version.category] if version.category else [],
                created_at=version.recorded_at,
                updated_at=version.recorded_at,
            )  # fmt: skip
        )
        previous = version.content
    return entries


def entity_of(entity: EntityCount, key_name: str, namespace: str) -> Mem0Entity:
    return Mem0Entity(
        id=f"{entity.type}:{entity.name}", name=entity.name, type=entity.type, total_memories=entity.total,
        owner=key_name, organization=namespace, created_at=entity.created_at, updated_at=entity.updated_at,
    )  # fmt: skip
