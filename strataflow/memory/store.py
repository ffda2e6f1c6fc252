"""L2 writes: versioned memory items, used by extraction and by manual CRUD (strataflow.memory.api).

One current row per (namespace, subject_id, agent_id, kind, key) in memory_items (a null agent_id is one
scope of its own: extracted items have none); every version, the current one included, in
memory_item_versions (bi-temporal: valid_from/valid_to in the world, recorded_at/superseded_at in our
knowledge). Rules (issue 5 item 4, seed 004):

- an unchanged value (and statement, importance, confidence, category) writes nothing;
- a change closes the current version (valid_to = the new statement's event time, superseded_at = now) and
  opens version + 1: action content_modified when the value changed, modified when only the statement,
  category, importance or confidence did;
- the newest event time wins: a statement older than the current one never replaces it; it is kept in
  history with its own valid interval (action kept_older);
- a manual item is never silently overwritten by extraction: the extracted value goes to history with a
  note, and the caller reports it (action manual_protected);
- a deleted item comes back (action new) only from a statement newer than its deletion;
- seed 003 entry fields (name, description, entry_type, is_shared) are versioned like the rest: KEEP (the
  default) keeps the current value, None clears it. An update by item_id may also change the item's kind
  and key (a renamed entry).

A restore (`strataflow import`, restore_item) writes an exported item and its history as they were, ids
renumbered by the caller: it adds the item when the namespace lacks its identity, brings it up to a newer
export of itself (the versions it lacks, then its current row), and otherwise changes nothing.

The caller owns the transaction. Given settings, a write that makes a new statement current embeds it in the
same write (strataflow.memory.item_embedding), so the item is found by meaning at once; without (and for a
restore), the embedding is left null for strataflow/pipeline/embed.py to fill (and reset to null when the
statement changes). The full-text vector is computed here. The SQL that reads the current row
and writes items and versions is in strataflow.memory.item_versions.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from models.common import DEFAULT_IMPORTANCE, MemoryKind
from models.vocabulary import SNAKE_KEY
from strataflow.config import Settings
from strataflow.memory.item_embedding import item_multi_vector, item_vector
from strataflow.memory.item_versions import (
    RESTORED_COLUMNS,
    CurrentItem,
    history_has_value,
    insert_item,
    insert_restored,
    insert_restored_versions,
    next_valid_from,
    record_version,
    replace_current,
    select_by_id,
    select_current,
    select_restore_target,
    update_restored,
)
from strataflow.textsearch import fts_parts

NEW = "new"
CONTENT_MODIFIED = "content_modified"
MODIFIED = "modified"
UNCHANGED = "unchanged"
KEPT_OLDER = "kept_older"
MANUAL_PROTECTED = "manual_protected"
CHANGED_ACTIONS = frozenset({NEW, CONTENT_MODIFIED, MODIFIED})

ENTRY_FIELDS = ("name", "description", "entry_type", "is_shared")


class _Keep:
    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()  # an entry field not given: the current item's value stays


def upsert_item(
    conn: Connection,
    *,
    namespace: str,
    subject_id: str,
    kind: str,
    key: str,
    value: Any,
    statement: str,
    category: str | None = None,
    importance: int | None = None,
    confidence: float = 1.0,
    source: str = "extracted",
    event_at: datetime,
    source_message_ids: Iterable[int] = (),
    run_id: uuid.UUID | None = None,
    prompt_version: str | None = None,
    model: str | None = None,
    agent_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    name: str | None = KEEP,
    description: str | None = KEEP,
    entry_type: str | None = KEEP,
    is_shared: bool = KEEP,
    item_id: int | None = None,
    settings: Settings | None = None,
) -> str:
    """Write one statement about (kind, key) in the agent's scope and return what happened: new,
    content_modified, modified, unchanged, kept_older or manual_protected (see the module docstring).

    With item_id, that item is the current one (it must exist), and kind and key may differ from its own: the
    new version renames it (the caller checks that the new identity is free). With settings, a new current
    statement is embedded in the same write."""
    if source not in ("extracted", "manual"):
        raise ValueError(f"memory item {kind}:{key}: source must be 'extracted' or 'manual', not {source!r}")
    kind = MemoryKind(kind).value
    if not SNAKE_KEY.match(key):
        raise ValueError(f"memory item key {key!r} must be lower snake_case (e.g. job_title)")
    row = _row(
        namespace, subject_id, kind, key, value, statement, category, importance, confidence, source,
        event_at, source_message_ids, run_id, prompt_version, model, agent_id, metadata,
    )  # fmt: skip
    row.update(name=name, description=description, entry_type=entry_type, is_shared=is_shared)
    if item_id is not None:
        current = select_by_id(conn, item_id)
        if current is None:
            raise LookupError(f"memory item {item_id} does not exist")
    else:
        current = select_current(conn, row)
    if current is None:
        _entry_fields(row, None)
        _embedding(conn, row, None, settings)
        item_id = insert_item(conn, row)
        if item_id is not None:
            record_version(conn, row, item_id, 1, NEW)
            return NEW
        current = select_current(conn, row)  # a concurrent writer inserted it first
        assert current is not None
    _entry_fields(row, current)
    same_value = current.value == value
    if current.status == "deleted":
        if event_at <= current.valid_from:
            return _keep_in_history(conn, row, current, KEPT_OLDER, "older than the deletion; not restored")
        _embedding(conn, row, current, settings)
        return replace_current(conn, row, current, NEW)
    if same_value and _same_details(current, row):
        return UNCHANGED
    if event_at < current.valid_from:
        if same_value:
            return UNCHANGED
        return _keep_in_history(conn, row, current, KEPT_OLDER, "older event time than the current value")
    if current.source == "manual" and source == "extracted":
        if same_value:
            return UNCHANGED
        return _keep_in_history(
            conn, row, current, MANUAL_PROTECTED, "extracted value kept out of a manually edited item"
        )
    _embedding(conn, row, current, settings)
    return replace_current(conn, row, current, MODIFIED if same_value else CONTENT_MODIFIED)


def delete_item(
    conn: Connection,
    *,
    namespace: str,
    subject_id: str,
    kind: str,
    key: str,
    event_at: datetime,
    run_id: uuid.UUID | None = None,
    source: str = "manual",
    agent_id: str | None = None,
) -> bool:
    """Mark the current item of the agent's scope deleted (a new version, action deleted); False when there
    is no active item."""
    kind = MemoryKind(kind).value
    probe = {"namespace": namespace, "subject_id": subject_id, "agent_id": agent_id, "kind": kind, "key": key}
    current = select_current(conn, probe)
    if current is None or current.status == "deleted":
        return False
    row = _row(
        namespace, subject_id, kind, key, current.value, current.statement or "", current.category,
        current.importance, current.confidence, source, max(event_at, current.valid_from), (), run_id, None,
        None, agent_id, None,
    )  # fmt: skip
    row.update({name: KEEP for name in ENTRY_FIELDS})
    _entry_fields(row, current)
    row["status"] = "deleted"
    replace_current(conn, row, current, "deleted")
    return True


def _row(
    namespace: str,
    subject_id: str,
    kind: str,
    key: str,
    value: Any,
    statement: str,
    category: str | None,
    importance: int | None,
    confidence: float,
    source: str,
    event_at: datetime,
    source_message_ids: Iterable[int],
    run_id: uuid.UUID | None,
    prompt_version: str | None,
    model: str | None,
    agent_id: str | None,
    metadata: Mapping[str, Any] | None,
) -> dict[str, Any]:
    fts_en, fts_zh = item_fts(key, statement, value)
    return {
        "namespace": namespace,
        "subject_id": subject_id,
        "agent_id": agent_id,
        "kind": kind,
        "key": key,
        "value": json.dumps(value, ensure_ascii=False),
        "raw_value": value,
        "statement": statement,
        "category": category,
        "importance": importance if importance is not None else DEFAULT_IMPORTANCE.get(MemoryKind(kind), 50),
        "confidence": confidence,
        "status": "active",
        "source": source,
        "event_at": event_at,
        "fts_en": fts_en,
        "fts_zh": fts_zh,
        "source_message_ids": sorted({int(i) for i in source_message_ids}),
        "metadata": json.dumps(dict(metadata or {}), ensure_ascii=False, default=str),
        "run_id": run_id,
        "prompt_version": prompt_version,
        "model": model,
        "embedding": None,  # null: the row keeps its embedding unless its statement changes
        "embedding_model": None,
        "embedding_multi": None,  # the multilingual vector (item_multi_vector), written with the embedding
        "embedding_multi_model": None,
    }


def _embedding(
    conn: Connection, row: dict[str, Any], current: CurrentItem | None, settings: Settings | None
) -> None:
    """Embed the row's statement when it becomes current and differs from the current one (a new item, a
    changed statement); nothing without settings."""
    if settings is None or (current is not None and current.statement == row["statement"]):
        return
    row["embedding"], row["embedding_model"] = item_vector(
        conn, settings, row["statement"], row["key"], row["raw_value"]
    )
    row["embedding_multi"], row["embedding_multi_model"] = item_multi_vector(
        conn, settings, row["statement"], row["key"], row["raw_value"], row["embedding_model"]
    )


def item_fts(
    key: str, statement: str | None, value: Any, name: str | None = None, description: str | None = None
) -> tuple[str, str]:
    """The full-text parts of an item: its key's words, statement and value, after its entry name and
    description when it has them (a name in Chinese is searchable although its key is not)."""
    text = f"{key.replace('_', ' ')} {statement or ''} {_value_text(value)}"
    if name or description:
        text = f"{name or ''} {description or ''} {text}"
    return fts_parts(text)


def restore_item(
    conn: Connection, namespace: str, item: Mapping[str, Any], versions: Iterable[Mapping[str, Any]]
) -> tuple[str, int | None, int]:
    """Write an exported item (RESTORED_COLUMNS; value and metadata as Python values) and its versions into
    namespace, as they were; returns (action, item id, versions added), the action new, updated (a newer
    export of an item the namespace has), unchanged, or kept (the namespace's item changed since: left as
    it is)."""
    row = {name: item[name] for name in RESTORED_COLUMNS}
    row.update(namespace=namespace, value=json.dumps(item["value"], ensure_ascii=False))
    row["metadata"] = json.dumps(dict(item["metadata"] or {}), ensure_ascii=False, default=str)
    fts = item_fts(item["key"], item["statement"], item["value"], item["name"], item["description"])
    row.update(fts_en=fts[0], fts_zh=fts[1])
    history = [{**v, "value": json.dumps(v["value"], ensure_ascii=False)} for v in versions]
    target = select_restore_target(conn, row)
    if target is None:
        item_id = insert_restored(conn, row)
        if item_id is None:  # a concurrent writer took the identity: leave its item alone
            return "kept", None, 0
        return NEW, item_id, insert_restored_versions(conn, row, item_id, history)
    if target.version == row["version"] and target.updated_at == row["updated_at"]:
        return UNCHANGED, target.item_id, 0
    if target.version > row["version"] or target.updated_at > row["updated_at"]:
        return "kept", target.item_id, 0
    added = insert_restored_versions(conn, row, target.item_id, history)
    update_restored(conn, row, target.item_id)
    return "updated", target.item_id, added


def _value_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _entry_fields(row: dict[str, Any], current: CurrentItem | None) -> None:
    """Entry fields not given keep the current item's values; the full-text vector also covers name and
    description (a name in Chinese is searchable although its key is not)."""
    for name in ENTRY_FIELDS:
        if row[name] is KEEP:
            row[name] = getattr(current, name) if current is not None else None
    row["is_shared"] = bool(row["is_shared"])
    if row["name"] or row["description"]:
        fts_en, fts_zh = item_fts(
            row["key"], row["statement"], row["raw_value"], row["name"], row["description"]
        )
        row.update(fts_en=fts_en, fts_zh=fts_zh)


def _same_details(current: CurrentItem, row: Mapping[str, Any]) -> bool:
    return (
        all(getattr(current, name) == row[name] for name in ("kind", "key", *ENTRY_FIELDS))
        and current.statement == row["statement"]
        and current.category == row["category"]
        and current.importance == row["importance"]
        and abs(current.confidence - row["confidence"]) < 1e-6
        and (
            row["source"] != "manual"
            or {**current.metadata, **json.loads(row["metadata"])} == current.metadata
        )
    )


def _keep_in_history(
    conn: Connection, row: dict[str, Any], current: CurrentItem, outcome: str, note: str
) -> str:
    """Record a statement that does not become current: a history row with its own valid interval."""
    params = {
        "item_id": current.item_id, "namespace": row["namespace"], "event_at": row["event_at"],
        "value": row["value"],
    }  # fmt: skip
    if history_has_value(conn, params):
        return UNCHANGED
    valid_to = next_valid_from(conn, params)
    if outcome == MANUAL_PROTECTED:
        valid_to = None
    history_action = CONTENT_MODIFIED if current.value != row["raw_value"] else MODIFIED
    record_version(
        conn,
        row,
        current.item_id,
        current.version,
        history_action,
        valid_to=valid_to,
        superseded=True,
        note=note,
    )
    return outcome
