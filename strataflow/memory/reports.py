"""L3 writes: one weekly report per (namespace, subject, ISO week), every earlier revision kept.

Rewriting a report (a late backfill changed its week, or a reprocess with another model or prompt version)
first copies the current revision into weekly_report_revisions, with the run, model and prompt version that
wrote it, then stores the new one as revision + 1. The embedding is reset for the embed stage to fill. The
caller owns the transaction; both statements take a list of rows (one round trip each for many reports).

A restore (`strataflow import`, restore_report) writes an exported report and its earlier revisions as they
were (revision, times and embedding included): a report the namespace lacks is added, a newer revision of
one it has replaces it (the current one archived first, as a rewrite does), anything else changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, text

from strataflow.textsearch import TSVECTOR_SQL, fts_parts

ARCHIVE_REPORT = text(
    """
    insert into weekly_report_revisions (report_id, namespace, subject_id, week_start, revision, summary,
                                         key_events, metrics, input_hash, source_message_ids, run_id,
                                         prompt_version, model, written_at)
    select report_id, namespace, subject_id, week_start, revision, summary, key_events, metrics, input_hash,
           source_message_ids, run_id, prompt_version, model, updated_at
    from weekly_reports
    where namespace = :namespace and subject_id = :subject_id and week_start = :week_start
    on conflict (report_id, revision) do nothing
    """
)
UPSERT_REPORT = text(
    f"""
    insert into weekly_reports (namespace, subject_id, week_start, week_end, summary, key_events, metrics,
                                input_hash, source_message_ids, fts, run_id, prompt_version, model)
    values (:namespace, :subject_id, :week_start, :week_end, :summary, cast(:key_events as jsonb),
            cast(:metrics as jsonb), :input_hash, :source_message_ids,
            {TSVECTOR_SQL.format(en=":fts_en", zh=":fts_zh")}, :run_id, :prompt_version, :model)
    on conflict (namespace, subject_id, week_start) do update set
        week_end = excluded.week_end, summary = excluded.summary, key_events = excluded.key_events,
        metrics = excluded.metrics, input_hash = excluded.input_hash,
        source_message_ids = excluded.source_message_ids, fts = excluded.fts, run_id = excluded.run_id,
        prompt_version = excluded.prompt_version, model = excluded.model,
        revision = weekly_reports.revision + 1,
        embedding = null, embedding_model = null, embedding_multi = null, embedding_multi_model = null,
        updated_at = now()
    """
)
REPORT_FIELDS = (
    "namespace",
    "subject_id",
    "week_start",
    "week_end",
    "summary",
    "key_events",
    "metrics",
    "input_hash",
    "source_message_ids",
    "fts_en",
    "fts_zh",
    "run_id",
    "prompt_version",
    "model",
)


def report_fts(summary: str, key_events: Sequence[Mapping[str, Any]]) -> tuple[str, str]:
    """The full-text parts of a report: its summary and its key events' text."""
    return fts_parts(summary + "\n" + "\n".join(str(event.get("event", "")) for event in key_events))


def write_reports(conn: Connection, rows: Sequence[dict[str, Any]], rewrites: bool = True) -> None:
    """Insert or rewrite weekly reports (each row has REPORT_FIELDS; key_events and metrics as JSON text).
    rewrites=False when none of them exists yet (nothing to archive)."""
    if not rows:
        return
    missing = [field for field in REPORT_FIELDS if field not in rows[0]]
    if missing:
        raise ValueError(f"weekly report row lacks {', '.join(missing)}")
    if rewrites:
        keys = ("namespace", "subject_id", "week_start")
        conn.execute(ARCHIVE_REPORT, [{key: row[key] for key in keys} for row in rows])
    conn.execute(UPSERT_REPORT, list(rows))


RESTORED_COLUMNS = (
    "subject_id", "week_start", "week_end", "summary", "key_events", "metrics", "input_hash",
    "source_message_ids", "embedding", "embedding_model", "run_id", "prompt_version", "model", "created_at",
    "updated_at", "revision",
)  # fmt: skip
_JSONB = ("key_events", "metrics")
_VALUES = ", ".join(f"cast(:{c} as jsonb)" if c in _JSONB else f":{c}" for c in RESTORED_COLUMNS)
_FTS = TSVECTOR_SQL.format(en=":fts_en", zh=":fts_zh")
INSERT_RESTORED = text(
    f"""
    insert into weekly_reports (namespace, {", ".join(RESTORED_COLUMNS)}, fts)
    values (:namespace, {_VALUES}, {_FTS})
    on conflict (namespace, subject_id, week_start) do nothing
    returning report_id
    """
)
SELECT_RESTORE_TARGET = text(
    """
    select report_id, revision from weekly_reports
    where namespace = :namespace and subject_id = :subject_id and week_start = :week_start
    for update
    """
)
_SET = ", ".join(f"{c} = cast(:{c} as jsonb)" if c in _JSONB else f"{c} = :{c}" for c in RESTORED_COLUMNS)
UPDATE_RESTORED = text(f"update weekly_reports set {_SET}, fts = {_FTS} where report_id = :report_id")
REVISION_COLUMNS = (
    "revision", "summary", "key_events", "metrics", "input_hash", "source_message_ids", "run_id",
    "prompt_version", "model", "written_at", "superseded_at",
)  # fmt: skip
INSERT_RESTORED_REVISION = text(
    f"""
    insert into weekly_report_revisions (report_id, namespace, subject_id, week_start,
                                         {", ".join(REVISION_COLUMNS)})
    values (:report_id, :namespace, :subject_id, :week_start,
            {", ".join(f"cast(:{c} as jsonb)" if c in _JSONB else f":{c}" for c in REVISION_COLUMNS)})
    on conflict (report_id, revision) do nothing
    """
)


def restore_report(
    conn: Connection,
    namespace: str,
    report: Mapping[str, Any],
    revisions: Sequence[Mapping[str, Any]],
) -> str:
    """Write an exported report (RESTORED_COLUMNS, key_events and metrics as Python values) and its earlier
    revisions into namespace; returns new, updated (a newer revision than the namespace's) or unchanged."""
    row = {name: report[name] for name in RESTORED_COLUMNS}
    fts_en, fts_zh = report_fts(report["summary"], report["key_events"])
    row.update(namespace=namespace, fts_en=fts_en, fts_zh=fts_zh)
    row.update({name: json.dumps(report[name], ensure_ascii=False) for name in _JSONB})
    target = conn.execute(SELECT_RESTORE_TARGET, row).first()
    if target is None:
        report_id = conn.execute(INSERT_RESTORED, row).scalar()
        if report_id is None:  # a concurrent rollup wrote the week first: leave its report alone
            return "unchanged"
        action = "new"
    elif target.revision < row["revision"]:
        conn.execute(ARCHIVE_REPORT, {k: row[k] for k in ("namespace", "subject_id", "week_start")})
        conn.execute(UPDATE_RESTORED, {**row, "report_id": target.report_id})
        report_id, action = target.report_id, "updated"
    else:
        return "unchanged"
    scope = {k: row[k] for k in ("namespace", "subject_id", "week_start")}
    rows = [
        {**scope, "report_id": report_id, **{c: r[c] for c in REVISION_COLUMNS}}
        | {name: json.dumps(r[name], ensure_ascii=False) for name in _JSONB}
        for r in revisions
        if r["revision"] < row["revision"]
    ]
    if rows:
        conn.execute(INSERT_RESTORED_REVISION, rows)
    return action
