"""The SQL of an L2 write: one memory item's current row and its versions.

strataflow.memory.store decides what a statement does to an item (the rules in its docstring); this module
reads the item's current row under a row lock and writes the outcome: a new item, a replaced current version
(close the old one, update the row, record the new one) or a version kept only in history. The row is the
parameter dict the store builds (value as JSON, full-text parts, entry fields already resolved, and the
embedding when the store computed one: a null embedding keeps the row's own unless the statement changed).

History is written through security definer functions (sql/101): agent roles have no direct write on
memory_item_versions; the functions take namespace, subject, kind and key from the item itself. The one
exception is a restore (`strataflow import`, run by the owner): it writes an exported item and its versions
as they were, processing times included (insert_restored, update_restored, insert_restored_versions).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, text

from strataflow.textsearch import TSVECTOR_SQL

CURRENT_COLUMNS = """
    item_id, value, statement, category, importance, confidence, status, source, version, valid_from,
    kind, key, name, description, entry_type, is_shared, metadata
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
        prompt_version, model, name, description, entry_type, is_shared, embedding, embedding_model,
        embedding_multi, embedding_multi_model)
    values (:namespace, :subject_id, :agent_id, :kind, :key, cast(:value as jsonb), :statement, :category,
        :importance, :confidence, :source, 1, :event_at, {TSVECTOR_SQL.format(en=":fts_en", zh=":fts_zh")},
        :source_message_ids, cast(:metadata as jsonb), :run_id, :prompt_version, :model, :name, :description,
        :entry_type, coalesce(cast(:is_shared as boolean), false), cast(:embedding as vector),
        :embedding_model, cast(:embedding_multi as vector), cast(:embedding_multi_model as text))
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
        embedding = case when cast(:embedding as vector) is not null then cast(:embedding as vector)
            when statement is distinct from :statement then null else embedding end,
        embedding_model = case when cast(:embedding as vector) is not null then :embedding_model
            when statement is distinct from :statement then null else embedding_model end,
        embedding_multi = case when cast(:embedding as vector) is not null
            then cast(:embedding_multi as vector) else embedding_multi end,
        embedding_multi_model = case when cast(:embedding as vector) is not null
            then cast(:embedding_multi_model as text) else embedding_multi_model end,
        fts = {TSVECTOR_SQL.format(en=":fts_en", zh=":fts_zh")},
        source_message_ids = :source_message_ids, metadata = metadata || cast(:metadata as jsonb),
        run_id = :run_id, prompt_version = :prompt_version, model = :model,
        kind = :kind, key = :key, name = :name, description = :description, entry_type = :entry_type,
        is_shared = coalesce(cast(:is_shared as boolean), false),
        confirmed_model = null, confirmed_prompt_version = null, confirmed_run_id = null, confirmed_at = null
    where item_id = :item_id
    """
)
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
class CurrentItem:
    """The current row of an item, as the store compares a new statement with it."""

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
    metadata: dict[str, Any]


def select_current(conn: Connection, row: Mapping[str, Any]) -> CurrentItem | None:
    """The current row of (namespace, subject, agent, kind, key), locked for update; None if there is none."""
    found = conn.execute(
        SELECT_CURRENT, {k: row[k] for k in ("namespace", "subject_id", "agent_id", "kind", "key")}
    ).first()
    return None if found is None else CurrentItem(*found)


def select_by_id(conn: Connection, item_id: int) -> CurrentItem | None:
    """The current row of the item with this id, locked for update; None when there is none."""
    found = conn.execute(SELECT_CURRENT_BY_ID, {"item_id": item_id}).first()
    return None if found is None else CurrentItem(*found)


def insert_item(conn: Connection, row: Mapping[str, Any]) -> int | None:
    """Insert row as version 1 of a new item and return its id; None when a concurrent writer inserted the
    same identity first. The caller records the version."""
    item_id: int | None = conn.execute(INSERT_ITEM, row).scalar()
    return item_id


def replace_current(conn: Connection, row: Mapping[str, Any], current: CurrentItem, action: str) -> str:
    """Close the current version and make row the current one (version + 1, recorded with action); returns
    action."""
    version = current.version + 1
    conn.execute(
        CLOSE_VERSION, {"item_id": current.item_id, "version": current.version, "event_at": row["event_at"]}
    )
    conn.execute(UPDATE_ITEM, {**row, "item_id": current.item_id, "version": version})
    record_version(conn, row, current.item_id, version, action)
    return action


def history_has_value(conn: Connection, params: Mapping[str, Any]) -> bool:
    """Whether the item's history already holds this value from this event time (params: item_id,
    namespace, event_at, value)."""
    return conn.execute(SELECT_HISTORY_DUPLICATE, params).first() is not None


def next_valid_from(conn: Connection, params: Mapping[str, Any]) -> datetime | None:
    """The earliest start of a later version in the item's history (params as history_has_value); None when
    there is none."""
    valid_from: datetime | None = conn.execute(SELECT_NEXT_VALID_FROM, params).scalar()
    return valid_from


def record_version(
    conn: Connection,
    row: Mapping[str, Any],
    item_id: int,
    version: int,
    action: str,
    valid_to: datetime | None = None,
    superseded: bool = False,
    note: str | None = None,
) -> None:
    """One row of memory_item_versions for row (through strataflow_record_item_version)."""
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


# A restore: the exported row as it was (ids renumbered by the caller), in the target namespace.
RESTORED_COLUMNS = (
    "subject_id", "agent_id", "kind", "key", "value", "statement", "category", "importance", "confidence",
    "status", "source", "version", "valid_from", "recorded_at", "updated_at", "created_at",
    "reflected_version", "embedding", "embedding_model", "source_message_ids", "metadata", "run_id",
    "prompt_version", "model", "name", "description", "entry_type", "is_shared", "confirmed_model",
    "confirmed_prompt_version", "confirmed_run_id", "confirmed_at",
)  # fmt: skip
_JSONB = ("value", "metadata")
_RESTORED_VALUES = ", ".join(f"cast(:{c} as jsonb)" if c in _JSONB else f":{c}" for c in RESTORED_COLUMNS)
_FTS = TSVECTOR_SQL.format(en=":fts_en", zh=":fts_zh")
INSERT_RESTORED = text(
    f"""
    insert into memory_items (namespace, {", ".join(RESTORED_COLUMNS)}, fts)
    values (:namespace, {_RESTORED_VALUES}, {_FTS})
    on conflict (namespace, subject_id, agent_id, kind, key) do nothing
    returning item_id
    """
)
_RESTORED_SET = ", ".join(
    f"{c} = cast(:{c} as jsonb)" if c in _JSONB else f"{c} = :{c}" for c in RESTORED_COLUMNS
)
UPDATE_RESTORED = text(f"update memory_items set {_RESTORED_SET}, fts = {_FTS} where item_id = :item_id")
SELECT_RESTORE_TARGET = text(
    """
    select item_id, version, updated_at from memory_items
    where namespace = :namespace and subject_id = :subject_id and agent_id is not distinct from :agent_id
        and kind = :kind and key = :key
    for update
    """
)
VERSION_COLUMNS = (
    "kind", "key", "version", "action", "value", "statement", "category", "importance", "confidence",
    "status", "source", "valid_from", "valid_to", "recorded_at", "superseded_at", "source_message_ids",
    "run_id", "prompt_version", "model", "note", "agent_id", "name", "description", "entry_type", "is_shared",
)  # fmt: skip
INSERT_RESTORED_VERSION = text(
    f"""
    insert into memory_item_versions (item_id, namespace, subject_id, {", ".join(VERSION_COLUMNS)})
    values (:item_id, :namespace, :subject_id,
            {", ".join("cast(:value as jsonb)" if c == "value" else f":{c}" for c in VERSION_COLUMNS)})
    """
)
SELECT_VERSION_KEYS = text(
    """
    select version_id, version, action, recorded_at, superseded_at from memory_item_versions
    where item_id = :item_id and namespace = :namespace
    """
)
CLOSE_RESTORED_VERSION = text(
    """
    update memory_item_versions set valid_to = :valid_to, superseded_at = :superseded_at
    where version_id = :version_id and superseded_at is null
    """
)


@dataclass(frozen=True)
class RestoreTarget:
    """The item a restored row lands on, when the namespace already has its identity."""

    item_id: int
    version: int
    updated_at: datetime


def select_restore_target(conn: Connection, row: Mapping[str, Any]) -> RestoreTarget | None:
    """The target namespace's item with the row's identity, locked; None when there is none."""
    found = conn.execute(
        SELECT_RESTORE_TARGET, {k: row[k] for k in ("namespace", "subject_id", "agent_id", "kind", "key")}
    ).first()
    return None if found is None else RestoreTarget(*found)


def insert_restored(conn: Connection, row: Mapping[str, Any]) -> int | None:
    """Insert an exported item as it was (RESTORED_COLUMNS, fts_en, fts_zh); None when its identity is
    taken."""
    item_id: int | None = conn.execute(INSERT_RESTORED, row).scalar()
    return item_id


def update_restored(conn: Connection, row: Mapping[str, Any], item_id: int) -> None:
    """Make an existing item the exported row (a newer export of the same item)."""
    conn.execute(UPDATE_RESTORED, {**row, "item_id": item_id})


def insert_restored_versions(
    conn: Connection, row: Mapping[str, Any], item_id: int, versions: Sequence[Mapping[str, Any]]
) -> int:
    """Add the exported versions the item's history lacks (by version, action and recorded_at) and close the
    ones the export closed; returns how many were added."""
    known = {
        (v.version, v.action, v.recorded_at): v
        for v in conn.execute(SELECT_VERSION_KEYS, {"item_id": item_id, "namespace": row["namespace"]})
    }
    scope = {"item_id": item_id, "namespace": row["namespace"], "subject_id": row["subject_id"]}
    added, closed = [], []
    for version in versions:
        have = known.get((version["version"], version["action"], version["recorded_at"]))
        if have is None:
            added.append({**scope, **{c: version[c] for c in VERSION_COLUMNS}})
        elif have.superseded_at is None and version["superseded_at"] is not None:
            closed.append(
                {"version_id": have.version_id, "valid_to": version["valid_to"],
                 "superseded_at": version["superseded_at"]}
            )  # fmt: skip
    if added:
        conn.execute(INSERT_RESTORED_VERSION, added)
    if closed:
        conn.execute(CLOSE_RESTORED_VERSION, closed)
    return len(added)
