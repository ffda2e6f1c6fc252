"""Shapes only: strataflow's rows (models.memory_items, strataflow.memory.item_sets) as mem0's answers, and
mem0's texts as entry names. No database access and no decisions about what is stored: the routes
(strataflow.service.routes.mem0) call the one L2 API and hand its rows here.

Mapping (docs/integrations.md): user_id -> subject, agent_id -> the item's agent, run_id -> the conversation
(`metadata.conversation_id` of a memory stored with one, else the one conversation of the messages an
extracted memory came from), memory -> the item's content, categories -> [category], metadata -> the item's
metadata without the run and app fields, app_id -> `metadata.app_id`. A memory stored with infer=False is an
entry of type `user` (kind fact) named by strataflow.memory.adapters.mem0_entry_name (its text), so the same
text stored twice for a user is one memory.
"""

from __future__ import annotations

import hashlib
from typing import Any

from models.memory_items import MemoryItem, MemoryVersion
from strataflow.memory import adapters
from strataflow.memory.item_sets import EntityCount
from strataflow.service.mem0_schemas import Mem0Entity, Mem0HistoryEntry, Mem0Hit, Mem0Memory

ENTRY_TYPE = "user"  # the seed 003 type of a memory stored through mem0 (kind fact)
HISTORY_EVENTS = {"new": "ADD", "content_modified": "UPDATE", "modified": "UPDATE", "deleted": "DELETE"}


def shown_metadata(item: MemoryItem) -> dict[str, Any] | None:
    return adapters.shown_metadata(item.metadata)


def memory_of(item: MemoryItem, run_id: str | None) -> Mem0Memory:
    return Mem0Memory(
        id=str(item.id), memory=adapters.mem0_text(item.content, item.statement, item.source),
        user_id=item.subject, agent_id=item.agent, run_id=run_id,
        app_id=adapters.app_of(item.metadata), hash=hashlib.md5(item.content.encode()).hexdigest(),
        metadata=shown_metadata(item),
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
                metadata=adapters.shown_metadata(
                    version.metadata if version.metadata is not None else item.metadata
                ),
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
