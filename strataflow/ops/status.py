"""`strataflow status`: what the pipeline has done and what is waiting, read from the operations tables."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from sqlalchemy import text

from strataflow.config import Settings
from strataflow.db.engine import engine_for

WATERMARK_LIMIT = 40

SELECT_WATERMARKS = text(
    """
    select w.stage, w.namespace, w.scope, w.position, w.updated_at,
           now() - w.updated_at as age,
           (select count(*) from conversation_messages m
             where w.position is not null and m.namespace = w.namespace and m.subject_id = w.scope
               and m.ingest_seq > w.position) as lag_messages
    from watermarks w
    order by lag_messages desc, w.stage, w.namespace, w.scope
    limit :limit
    """
)
COUNT_WATERMARKS = text("select count(*) from watermarks")
SELECT_LAST_RUNS = text(
    """
    select distinct on (r.flow) r.flow, r.status, r.started_at, r.finished_at, r.prefect_flow_run_id, r.error,
           (select count(*) from pipeline_runs a where a.flow = r.flow) as runs
    from pipeline_runs r
    order by r.flow, r.started_at desc
    """
)
SELECT_QUARANTINE_RATE = text(
    """
    with accepted as (
        select namespace, count(*) as count_accepted from message_keys group by namespace
    ), rejected as (
        select coalesce(namespace, '(none)') as namespace, count(*) as count_quarantined
        from quarantine group by 1
    )
    select coalesce(a.namespace, r.namespace) as namespace,
           coalesce(a.count_accepted, 0) as accepted,
           coalesce(r.count_quarantined, 0) as quarantined
    from accepted a
    full join rejected r on r.namespace = a.namespace
    order by 1
    """
)
SELECT_DUE_PARTITIONS = text(
    """
    select m.tableoid::regclass::text as partition_name,
           count(*) as count_rows,
           count(*) filter (where m.expires_at <= now()) as count_due_now,
           min(m.expires_at) as first_expires_at
    from conversation_messages m
    where m.expires_at <= now() + interval '7 days'
    group by 1
    order by 1
    """
)


class PipelineStatus(BaseModel):
    watermarks: list[dict[str, Any]]
    watermark_total: int
    last_runs: list[dict[str, Any]]
    quarantine: list[dict[str, Any]]
    due_partitions: list[dict[str, Any]]


def collect(settings: Settings) -> PipelineStatus:
    """Read the pipeline's state in one transaction."""
    with engine_for(settings).connect() as conn:
        return PipelineStatus(
            watermarks=[
                dict(r) for r in conn.execute(SELECT_WATERMARKS, {"limit": WATERMARK_LIMIT}).mappings()
            ],
            watermark_total=conn.execute(COUNT_WATERMARKS).scalar_one(),
            last_runs=[dict(r) for r in conn.execute(SELECT_LAST_RUNS).mappings()],
            quarantine=[dict(r) for r in conn.execute(SELECT_QUARANTINE_RATE).mappings()],
            due_partitions=[dict(r) for r in conn.execute(SELECT_DUE_PARTITIONS).mappings()],
        )


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value is not None else "-"


def render(status: PipelineStatus) -> str:
    """Plain-text tables for the terminal."""
    lines = ["Last run per flow:"]
    for run in status.last_runs:
        error = f"  error: {run['error'][:80]}" if run["error"] else ""
        lines.append(
            f"  {run['flow']:12} {run['status']:15} started {_when(run['started_at'])}"
            f"  finished {_when(run['finished_at'])}  ({run['runs']} runs){error}"
        )
    if not status.last_runs:
        lines.append("  no runs yet (strataflow run nightly, or strataflow demo)")
    shown = len(status.watermarks)
    lines.append(
        f"Watermarks (stage, namespace, scope; {shown} of {status.watermark_total}, most lag first):"
    )
    for mark in status.watermarks:
        lag = f"lag {mark['lag_messages']} msgs" if mark["position"] is not None else "file/source"
        lines.append(
            f"  {mark['stage']:12} {mark['namespace']:16} {str(mark['scope'])[:40]:40} {lag:16}"
            f" updated {_when(mark['updated_at'])}"
        )
    lines.append("Quarantine rate per namespace:")
    for row in status.quarantine:
        total = row["accepted"] + row["quarantined"]
        share = row["quarantined"] / total if total else 0.0
        lines.append(f"  {row['namespace']:20} {row['quarantined']} of {total} records ({share:.1%})")
    lines.append("L1 partitions due to expire (within 7 days):")
    for part in status.due_partitions:
        lines.append(
            f"  {part['partition_name']:36} {part['count_due_now']} rows due now,"
            f" {part['count_rows']} within 7 days (first {_when(part['first_expires_at'])})"
        )
    if not status.due_partitions:
        lines.append("  none")
    return "\n".join(lines)
