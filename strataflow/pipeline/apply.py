"""Applying a model's extracted items to L2: the one path from an LLM answer to memory_items, used by
extraction (strataflow/pipeline/extract.py), hot memory's typed items (hot_memory.py) and seed 000 save_info
(save_info.py), so every extracted item is written with the same rules and metadata.

- An item must cite a message it may rest on (`cites`: the prompt's ids of the subject's own turns, with
  their event times); one citing none of them, or of an internal kind (hot_summary), or of a kind the caller
  does not take (`kinds`), is dropped.
- Its event time is the newest of the messages it cites; its lineage is those messages' L1 ids (none when
  the prompt's ids are not L1 ids, as in save_info), the run, the prompt version and the model.
- Metadata: `{"approximate": true}` when the model said the number is approximate, plus the caller's extra
  metadata (save_info: `{"via": "save_info"}`).
- The write is strataflow.memory.store.upsert_item (source "extracted": an unchanged value writes nothing, a
  newer one wins, a manual item is never overwritten; given settings, a written item is embedded at once); an
  unchanged item records the confirming model and run (strataflow.memory.confirmations: a reprocess by
  another model).

The caller owns the transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from models.common import MemoryKind
from models.llm import ExtractedItem
from strataflow.config import Settings
from strataflow.memory import store
from strataflow.memory.confirmations import confirm_item


@dataclass(frozen=True)
class Lineage:
    """Who wrote an item: the run (None outside a recorded run), the prompt version and the model."""

    run_id: uuid.UUID | None
    prompt_version: str
    model: str


@dataclass(frozen=True)
class AppliedItem:
    """One item of the answer and what the store did with it (an action of strataflow.memory.store);
    confirmed: an unchanged item whose confirming model and run were recorded."""

    item: ExtractedItem
    action: str
    confirmed: bool = False

    @property
    def changed(self) -> bool:
        return self.action in store.CHANGED_ACTIONS


@dataclass
class Applied:
    """What applying one answer did: the items written (in answer order) and how many were dropped."""

    items: list[AppliedItem]
    dropped: int = 0

    @property
    def changed(self) -> int:
        return sum(applied.changed for applied in self.items)


def usable_sources(
    item: ExtractedItem, cites: Mapping[int, datetime], kinds: frozenset[str] | None = None
) -> list[int]:
    """The cited ids an item rests on; empty when it must be dropped (no usable citation, an internal kind,
    or a kind not in `kinds`)."""
    if item.kind is MemoryKind.hot_summary or (kinds is not None and item.kind.value not in kinds):
        return []
    return [i for i in dict.fromkeys(item.source_message_ids) if i in cites]


def apply_extracted(
    conn: Connection,
    namespace: str,
    subject_id: str,
    items: Iterable[ExtractedItem],
    cites: Mapping[int, datetime],
    lineage: Lineage,
    *,
    kinds: frozenset[str] | None = None,
    l1_ids: bool = True,
    metadata: Mapping[str, Any] | None = None,
    settings: Settings | None = None,
) -> Applied:
    """Upsert the answer's items into the subject's L2 (rules: module docstring). cites: prompt message id ->
    event time of the messages an item may rest on; l1_ids: those ids are L1 message ids (lineage); settings:
    embed each written item in the same write (found by meaning with no embed run in between)."""
    applied = Applied(items=[])
    for item in items:
        sources = usable_sources(item, cites, kinds)
        if not sources:
            applied.dropped += 1
            continue
        identity: dict[str, Any] = {
            "namespace": namespace,
            "subject_id": subject_id,
            "kind": item.kind.value,
            "key": item.key,
        }
        extra = {**(metadata or {}), **({"approximate": True} if item.approximate else {})}
        action = store.upsert_item(
            conn, **identity, value=item.value, statement=item.statement, category=item.category,
            importance=item.importance, confidence=item.confidence, source="extracted",
            event_at=max(cites[i] for i in sources), source_message_ids=sources if l1_ids else (),
            run_id=lineage.run_id, prompt_version=lineage.prompt_version, model=lineage.model,
            metadata=extra or None, settings=settings,
        )  # fmt: skip
        confirmed = action == store.UNCHANGED and confirm_item(
            conn,
            **identity,
            model=lineage.model,
            prompt_version=lineage.prompt_version,
            run_id=lineage.run_id,
        )
        applied.items.append(AppliedItem(item, action, confirmed))
    return applied
