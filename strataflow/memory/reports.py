"""L3 writes: one weekly report per (namespace, subject, ISO week), every earlier revision kept.

Rewriting a report (a late backfill changed its week, or a reprocess with another model or prompt version)
first copies the current revision into weekly_report_revisions, with the run, model and prompt version that
wrote it, then stores the new one as revision + 1. The embedding is reset for the embed stage to fill. The
caller owns the transaction; both statements take a list of rows (one round trip each for many reports).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, text

from strataflow.textsearch import TSVECTOR_SQL

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
        embedding = null, embedding_model = null, updated_at = now()
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
