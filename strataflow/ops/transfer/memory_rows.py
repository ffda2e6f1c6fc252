"""Restoring one subject's L2 items, insights, L3 reports and profile documents
(strataflow.ops.transfer.layers holds the subject's state, its messages, keys, watermarks and assets; its
module docstring says what an import trusts). Each row the target lacks is written by its layer's one writer
with the target's times and numbers; a row it holds as the file has it is unchanged; one it holds differently
is a conflict (kept, reported) unless the import replaces, which writes the file's content as the target's
next version.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, text

from models.transfer import InsightLine, ItemLine, ProfileLine, ReportLine
from strataflow.memory.item_versions import select_current
from strataflow.memory.profiles import restore_document
from strataflow.memory.reports import restore_report
from strataflow.memory.store import delete_item, restore_item, upsert_item
from strataflow.ops.transfer.layers import SubjectState
from strataflow.pipeline.reflect import restore_insight
from strataflow.pipeline.scopes import WEEK_HASH_SQL
from strataflow.timeutil import week_bounds

SELECT_WEEK_HASH = text(
    f"""
    select {WEEK_HASH_SQL} from message_keys as k
    where k.namespace = :namespace and k.subject_id = :subject_id
        and k.event_at >= :start and k.event_at < :end
    """
)
SELECT_REPORT = text(
    """
    select summary, revision from weekly_reports
    where namespace = :namespace and subject_id = :subject_id and week_start = :week_start
    """
)
SELECT_PROFILE = text(
    """
    select document, manual, status, version, created_at from profile_documents
    where namespace = :namespace and subject_id = :subject_id and doc_type = :doc_type
    """
)


def restore_item_line(conn: Connection, state: SubjectState, line: ItemLine) -> None:
    """A new item with its history (versions numbered by the target, updated_at now); an item the target
    holds as the file has it is unchanged; one it holds differently is a conflict, or with replace gets the
    file's content as its next version."""
    identity = {"namespace": state.namespace, "subject_id": line.subject_id, "agent_id": line.agent_id}
    current = select_current(conn, {**identity, "kind": line.kind.value, "key": line.key})
    if current is not None:
        state.items[line.item_id] = current.item_id
        if _same_item(current, line):
            state.count("items", "unchanged")
        elif not state.replace:
            agent = f" of agent {line.agent_id!r}" if line.agent_id else ""
            state.conflict("items", f"item {line.kind.value}:{line.key}{agent}")
        else:
            _replace_item(conn, state, line, current)
        state.result.layer("item_versions").read += len(line.versions)
        state.result.layer("item_versions").unchanged += len(line.versions)
        return
    numbers = {n: i for i, n in enumerate(sorted({v.version for v in line.versions} | {line.version}), 1)}
    item = line.model_dump(exclude={"type", "item_id", "versions", "embedding"})
    item["source_message_ids"] = state.ids(line.source_message_ids)
    item["kind"] = line.kind.value
    item["embedding"], item["embedding_model"] = state.vector(line)
    item.update(version=numbers[line.version], updated_at=state.now, created_at=state.now)
    item["reflected_version"] = numbers.get(line.reflected_version or 0)
    versions = [
        {
            **version.model_dump(),
            "version": numbers[version.version],
            "kind": version.kind.value,
            "source_message_ids": state.ids(version.source_message_ids),
        }
        for version in line.versions
    ]
    action, item_id, added = restore_item(conn, state.namespace, item, versions)
    if item_id is not None:
        state.items[line.item_id] = item_id
    state.count("items", action)
    history = state.result.layer("item_versions")
    history.read += len(line.versions)
    history.new += added
    history.unchanged += len(line.versions) - added


def _same_item(current: Any, line: ItemLine) -> bool:
    return (
        current.value == line.value
        and current.statement == line.statement
        and current.status == line.status
        and current.category == line.category
        and current.importance == line.importance
        and abs(current.confidence - line.confidence) < 1e-6
        and (current.name, current.description, current.entry_type, bool(current.is_shared))
        == (line.name, line.description, line.entry_type, line.is_shared)
    )


def _replace_item(conn: Connection, state: SubjectState, line: ItemLine, current: Any) -> None:
    """The file's content as the item's next version, by the store's own writers (history kept)."""
    what: dict[str, Any] = {
        "namespace": state.namespace,
        "subject_id": line.subject_id,
        "kind": line.kind.value,
    }
    what.update(key=line.key, agent_id=line.agent_id, run_id=state.run_id)
    at = max(state.now, current.valid_from)
    if line.status == "deleted":
        changed = delete_item(conn, **what, event_at=at, source=line.source)
        state.count("items", "updated" if changed else "unchanged")
        return
    action = upsert_item(
        conn, **what, value=line.value, statement=line.statement or "", category=line.category,
        importance=line.importance, confidence=line.confidence, source=line.source, event_at=at,
        source_message_ids=state.ids(line.source_message_ids), prompt_version=line.prompt_version,
        model=line.model, metadata=line.metadata, name=line.name, description=line.description,
        entry_type=line.entry_type, is_shared=line.is_shared, item_id=current.item_id,
        settings=state.settings,
    )  # fmt: skip
    if action == "manual_protected":
        state.conflict("items", f"item {line.kind.value}:{line.key}", "the target's is manually edited")
    else:
        state.count("items", "unchanged" if action == "unchanged" else "updated")


def restore_insight_line(conn: Connection, state: SubjectState, line: InsightLine) -> None:
    row = line.model_dump(exclude={"type", "insight_id", "embedding"})
    row["evidence_item_ids"] = state.ids(line.evidence_item_ids, state.items)
    row["evidence_message_ids"] = state.ids(line.evidence_message_ids)
    row["embedding"], row["embedding_model"] = state.vector(line)
    row["namespace"] = state.namespace
    state.count("insights", "new" if restore_insight(conn, row) else "unchanged")


def restore_report_line(conn: Connection, state: SubjectState, line: ReportLine) -> None:
    """A new week's report with its revisions (numbered by the target, times now); a week the target has
    with the same summary is unchanged, with another a conflict, or with replace the file's summary as the
    week's next revision (the target's goes to the revisions)."""
    scope = {"namespace": state.namespace, "subject_id": line.subject_id, "week_start": line.week_start}
    existing = conn.execute(SELECT_REPORT, scope).first()
    if existing is not None and (existing.summary == line.summary or not state.replace):
        if existing.summary == line.summary:
            state.count("reports", "unchanged")
        else:
            state.conflict("reports", f"weekly report of {line.week_start}")
        state.result.layer("report_revisions").read += len(line.revisions)
        return
    report = line.model_dump(exclude={"type", "report_id", "current", "revisions", "embedding"})
    numbers = {
        n: i
        for i, n in enumerate(sorted({r.revision for r in line.revisions if r.revision < line.revision}), 1)
    }
    report.update(created_at=state.now, updated_at=state.now, revision=len(numbers) + 1)
    if existing is not None:
        report["revision"] = existing.revision + 1
    report["source_message_ids"] = state.ids(line.source_message_ids)
    report["key_events"] = [_mapped_event(state, event) for event in line.key_events]
    report["embedding"], report["embedding_model"] = state.vector(line)
    if line.current:  # the target's hash of the same week: a rollup there finds the report current
        start, end = week_bounds(line.week_start, state.settings.tz)
        params = {"namespace": state.namespace, "subject_id": line.subject_id, "start": start, "end": end}
        report["input_hash"] = conn.execute(SELECT_WEEK_HASH, params).scalar() or line.input_hash
    revisions = [
        {
            **revision.model_dump(),
            "revision": numbers[revision.revision],
            "source_message_ids": state.ids(revision.source_message_ids),
            "key_events": [_mapped_event(state, e) for e in revision.key_events]
            if isinstance(revision.key_events, list)
            else revision.key_events,
        }
        for revision in line.revisions
        if revision.revision in numbers and existing is None
    ]
    state.count("reports", restore_report(conn, state.namespace, report, revisions))
    state.result.layer("report_revisions").read += len(line.revisions)


def restore_profile_line(conn: Connection, state: SubjectState, line: ProfileLine) -> None:
    """A profile document the target lacks (version 1, times now); the same one is unchanged, another a
    conflict, or with replace the file's as the target's next version."""
    key = {"namespace": state.namespace, "subject_id": line.subject_id, "doc_type": line.doc_type}
    existing = conn.execute(SELECT_PROFILE, key).first()
    stored = line.model_dump(exclude={"type", "subject_id", "doc_type"})
    stored.update(version=1, created_at=state.now, updated_at=state.now)
    if existing is not None:
        same = (existing.document, existing.manual, existing.status) == (
            line.document,
            line.manual,
            line.status,
        )
        if same or not state.replace:
            if same:
                state.count("profiles", "unchanged")
            else:
                state.conflict("profiles", f"{line.doc_type} profile")
            return
        stored.update(version=existing.version + 1, created_at=existing.created_at)
    action = restore_document(conn, state.namespace, line.subject_id, line.doc_type, stored)
    state.count("profiles", action)


def _mapped_event(state: SubjectState, event: Any) -> Any:
    if isinstance(event, dict) and isinstance(event.get("message_ids"), list):
        old = [i for i in event["message_ids"] if isinstance(i, int)]
        return {**event, "message_ids": state.ids(old)}
    return event
