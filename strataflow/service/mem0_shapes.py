"""Shapes only: the memories of strataflow.adapters.mem0 (Mem0Record: an item with its user, run and
metadata) as mem0's answers. No database access and no decisions about what is stored.

Mapping (docs/integrations.md): memory -> the item's text (an extracted one: its statement), user_id -> the
record's user (none for a memory of an agent or run alone), agent_id -> the item's agent, run_id -> the
record's run, categories -> [category], metadata -> the record's metadata without the run and app fields,
app_id -> its app.
"""

from __future__ import annotations

import hashlib

from models.memory_items import MemoryVersion
from strataflow.adapters.mem0 import EntityCount, Mem0Record
from strataflow.adapters.mem0_names import shown_metadata
from strataflow.service.mem0_schemas import (
    Mem0AddResult,
    Mem0Entity,
    Mem0EventResult,
    Mem0HistoryEntry,
    Mem0Hit,
    Mem0Memory,
)

HISTORY_EVENTS = {"new": "ADD", "content_modified": "UPDATE", "modified": "UPDATE", "deleted": "DELETE"}


def memory_of(record: Mem0Record) -> Mem0Memory:
    item = record.item
    return Mem0Memory(
        id=str(item.id), memory=record.text, user_id=record.user_id, agent_id=item.agent,
        run_id=record.run_id, app_id=record.app_id, hash=hashlib.md5(item.content.encode()).hexdigest(),
        metadata=shown_metadata(record.metadata), categories=[item.category] if item.category else [],
        created_at=item.created_at, updated_at=item.updated_at,
    )  # fmt: skip


def hit_of(record: Mem0Record) -> Mem0Hit:
    score = min(1.0, max(0.0, float(record.score or 0.0)))
    return Mem0Hit(**memory_of(record).model_dump(), score=score, explain=record.explain)


def added_of(record: Mem0Record, event: str) -> Mem0AddResult:
    return Mem0AddResult(
        id=str(record.item.id), memory=record.text, event=event, user_id=record.user_id,
        agent_id=record.item.agent, run_id=record.run_id, metadata=shown_metadata(record.metadata),
    )  # fmt: skip


def made_of(record: Mem0Record) -> Mem0EventResult:
    return Mem0EventResult(
        id=str(record.item.id), event="ADD", user_id=record.user_id, agent_id=record.item.agent,
        memory=record.text, data={"memory": record.text},
    )  # fmt: skip


def history_of(record: Mem0Record, versions: list[MemoryVersion]) -> list[Mem0HistoryEntry]:
    """The versions that were current, oldest first, as ADD / UPDATE / DELETE events (a version kept only in
    history, e.g. an extracted value kept out of a manual item, was never the memory: left out)."""
    item = record.item
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
                user_id=record.user_id,
                agent_id=version.agent,
                metadata=shown_metadata(version.metadata if version.metadata is not None else item.metadata),
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
