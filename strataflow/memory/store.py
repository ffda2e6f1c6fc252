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

The caller owns the transaction. Embeddings are left null for tasks/embed.py to fill (and reset to null when
the statement changes); the full-text vector is computed here.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

from models.common import DEFAULT_IMPORTANCE, MemoryKind
from models.vocabulary import SNAKE_KEY
from strataflow.textsearch import TSVECTOR_SQL, fts_parts

NEW = "new"
CONTENT_MODIFIED = "content_modified"
MODIFIED = "modified"
UNCHANGED = "unchanged"
KEPT_OLDER = "kept_older"
MANUAL_PROTECTED = "manual_protected"
CHANGED_ACTIONS = frozenset({NEW, CONTENT_MODIFIED, MODIFIED})

CURRENT_COLUMNS = """
    item_id, value, statement, category, importance, confidence, status, source, version, valid_from,
    kind, key, name, description, entry_type, is_shared
"""
SELECT_CURRENT = text(
    f"""
    select {CURRENT_COLUMNS}
    from memory_items
    where namespace = :namespace and subject_id = :subject_id and agent_id is not distinct from :agent_id
        and kind = :kind and key = :key
    for update
    """
)
SELECT_CURRENT_BY_ID = text(f"select {CURRENT_COLUMNS} from memory_items where item_id = :item_id for update")
INSERT_ITEM = text(
    f"""
    insert into memory_items (namespace, subject_id, agent_id, kind, key, value, statement, category,
        importance, confidence, source, version, valid_from, fts, source_message_ids, metadata, run_id,
        prompt_version, model, name, description, entry_type, is_shared)
    values (:namespace, :subject_id, :agent_id, :kind, :key, cast(:value as jsonb), :statement, :category,
        :importance, :confidence, :source, 1, :event_at, {TSVECTOR_SQL.format(en=":fts_en", zh=":fts_zh")},
        :source_message_ids, cast(:metadata as jsonb), :run_id, :prompt_version, :model, :name, :description,
        :entry_type, coalesce(cast(:is_shared as boolean), false))
    on conflict (namespace, subject_id, agent_id, kind, key) do nothing
    returning item_id
    """
)
UPDATE_ITEM = text(
    f"""
    update memory_items set
        value = cast(:value as jsonb), statement = :statement, category = :category, importance = :importance,
        confidence = :confidence, status = :status, source = :source, version = :version,
        valid_from = :event_at, recorded_at = now(), updated_at = now(),
        embedding = case when statement is distinct from :statement then null else embedding end,
        embedding_model = case when statement is distinct from :statement then null else embedding_model end,
        fts = {TSVECTOR_SQL.format(en=":fts_en", zh=":fts_zh")},
        source_message_ids = :source_message_ids, metadata = metadata || cast(:metadata as jsonb),
        run_id = :run_id, prompt_version = :prompt_version, model = :model,
        kind = :kind, key = :key, name = :name, description = :description, entry_type = :entry_type,
        is_shared = coalesce(cast(:is_shared as boolean), false),
        confirmed_model = null, confirmed_prompt_version = null, confirmed_run_id = null, confirmed_at = null
    where item_id = :item_id
    """
)
# History is written through security definer functions (sql/101): agent roles have no direct write on
# memory_item_versions; the functions take namespace, subject, kind and key from the item itself.
CLOSE_VERSION = text("select strataflow_close_item_version(:item_id, cast(:version as integer), :event_at)")
INSERT_VERSION = text(
    """
    select strataflow_record_item_version(cast(:item_id as bigint), cast(:version as integer), :action,
        cast(:value as jsonb), :statement, :category, cast(:importance as integer), cast(:confidence as real),
        :status, :source, :event_at, :valid_to, cast(:superseded as boolean),
        cast(:source_message_ids as bigint[]), cast(:run_id as uuid), :prompt_version, :model, :note)
    """
)
SELECT_HISTORY_DUPLICATE = text(
    """
    select 1 from memory_item_versions
    where item_id = :item_id and namespace = :namespace and valid_from = :event_at
      and value = cast(:value as jsonb)
    limit 1
    """
)
SELECT_NEXT_VALID_FROM = text(
    """
    select min(valid_from) from memory_item_versions
    where item_id = :item_id and namespace = :namespace and valid_from > :event_at and note is null
    """
)


@dataclass(frozen=True)
class _Current:
    item_id: int
    value: Any
    statement: str | None
    category: str | None
    importance: int
    confidence: float
    status: str
    source: str
    version: int
    valid_from: datetime
    kind: str
    key: str
    name: str | None
    description: str | None
    entry_type: str | None
    is_shared: bool


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
) -> str:
    """Write one statement about (kind, key) in the agent's scope and return what happened: new,
    content_modified, modified, unchanged, kept_older or manual_protected (see the module docstring).

    With item_id, that item is the current one (it must exist), and kind and key may differ from its own: the
    new version renames it (the caller checks that the new identity is free)."""
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
        current = _select_by_id(conn, item_id)
        if current is None:
            raise LookupError(f"memory item {item_id} does not exist")
    else:
        current = _select_current(conn, row)
    if current is None:
        _entry_fields(row, None)
        item_id = conn.execute(INSERT_ITEM, row).scalar()
        if item_id is not None:
            _insert_version(conn, row, item_id, 1, NEW)
            return NEW
        current = _select_current(conn, row)  # a concurrent writer inserted it first
        assert current is not None
    _entry_fields(row, current)
    same_value = current.value == value
    if current.status == "deleted":
        if event_at <= current.valid_from:
            return _keep_in_history(conn, row, current, KEPT_OLDER, "older than the deletion; not restored")
        return _replace(conn, row, current, NEW)
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
    return _replace(conn, row, current, MODIFIED if same_value else CONTENT_MODIFIED)


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
    current = _select_current(conn, probe)
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
    _replace(conn, row, current, "deleted")
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
    fts_en, fts_zh = fts_parts(f"{key.replace('_', ' ')} {statement} {_value_text(value)}")
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
    }


def _value_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _select_current(conn: Connection, row: Mapping[str, Any]) -> _Current | None:
    found = conn.execute(
        SELECT_CURRENT, {k: row[k] for k in ("namespace", "subject_id", "agent_id", "kind", "key")}
    ).first()
    return None if found is None else _Current(*found)


def _select_by_id(conn: Connection, item_id: int) -> _Current | None:
    found = conn.execute(SELECT_CURRENT_BY_ID, {"item_id": item_id}).first()
    return None if found is None else _Current(*found)


def _entry_fields(row: dict[str, Any], current: _Current | None) -> None:
    """Entry fields not given keep the current item's values; the full-text vector also covers name and
    description (a name in Chinese is searchable although its key is not)."""
    for name in ENTRY_FIELDS:
        if row[name] is KEEP:
            row[name] = getattr(current, name) if current is not None else None
    row["is_shared"] = bool(row["is_shared"])
    if row["name"] or row["description"]:
        extra = f"{row['name'] or ''} {row['description'] or ''}"
        fts_en, fts_zh = fts_parts(f"{extra} {row['key'].replace('_', ' ')} {row['statement']} "
                                   f"{_value_text(row['raw_value'])}")  # fmt: skip
        row.update(fts_en=fts_en, fts_zh=fts_zh)


def _same_details(current: _Current, row: Mapping[str, Any]) -> bool:
    return (
        all(getattr(current, name) == row[name] for name in ("kind", "key", *ENTRY_FIELDS))
        and current.statement == row["statement"]
        and current.category == row["category"]
        and current.importance == row["importance"]
        and abs(current.confidence - row["confidence"]) < 1e-6
    )


def _replace(conn: Connection, row: dict[str, Any], current: _Current, action: str) -> str:
    """Close the current version and make row the current one (version + 1)."""
    version = current.version + 1
    conn.execute(
        CLOSE_VERSION, {"item_id": current.item_id, "version": current.version, "event_at": row["event_at"]}
    )
    conn.execute(UPDATE_ITEM, {**row, "item_id": current.item_id, "version": version})
    _insert_version(conn, row, current.item_id, version, action)
    return action


def _keep_in_history(
    conn: Connection, row: dict[str, Any], current: _Current, outcome: str, note: str
) -> str:
    """Record a statement that does not become current: a history row with its own valid interval."""
    params = {
        "item_id": current.item_id, "namespace": row["namespace"], "event_at": row["event_at"],
        "value": row["value"],
    }  # fmt: skip
    if conn.execute(SELECT_HISTORY_DUPLICATE, params).first() is not None:
        return UNCHANGED
    valid_to = conn.execute(SELECT_NEXT_VALID_FROM, params).scalar()
    if outcome == MANUAL_PROTECTED:
        valid_to = None
    history_action = CONTENT_MODIFIED if current.value != row["raw_value"] else MODIFIED
    _insert_version(
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


def _insert_version(
    conn: Connection,
    row: Mapping[str, Any],
    item_id: int,
    version: int,
    action: str,
    valid_to: datetime | None = None,
    superseded: bool = False,
    note: str | None = None,
) -> None:
    conn.execute(
        INSERT_VERSION,
        {
            **row,
            "item_id": item_id,
            "version": version,
            "action": action,
            "valid_to": valid_to,
            "superseded": superseded,
            "note": note,
        },
    )
