"""`strataflow status`: what the pipeline has done and what is waiting, read from the operations tables.

The last run of each flow shows its final state as pipeline_runs has it (completed, completed_with_errors,
budget_stopped, failed, or running), its failed LLM units and its error text (scopes named by hash).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from sqlalchemy import text

from strataflow.config import Settings
from strataflow.db.engine import engine_for

WATERMARK_LIMIT = 40
ERROR_CHARS = 300

SELECT_WATERMARKS = text(
    """
    select w.stage, w.namespace, w.scope, w.position, w.updated_at,
           now() - w.updated_at as age,
           (select count(*) from conversation_messages m
             where w.position is not null and m.namespace = w.namespace and m.subject_id = w.scope
               and m.ingest_seq > w.position) as lag_messages
    from watermarks w
    where cast(:namespace as text) is null or w.namespace = cast(:namespace as text)
    order by lag_messages desc, w.stage, w.namespace, w.scope
    limit :limit
    """
)
COUNT_WATERMARKS = text(
    """
    select count(*) from watermarks
    where cast(:namespace as text) is null or namespace = cast(:namespace as text)
    """
)
SELECT_LAST_RUNS = text(
    """
    select distinct on (r.flow) r.flow, r.status, r.started_at, r.finished_at, r.prefect_flow_run_id, r.error,
           coalesce((r.counts ->> 'units_failed')::int, 0) as units_failed,
           (select count(*) from pipeline_runs a
             where a.flow = r.flow and a.namespace is not distinct from r.namespace) as runs
    from pipeline_runs r
    where cast(:namespace as text) is null or r.namespace = cast(:namespace as text)
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
    where cast(:namespace as text) is null or coalesce(a.namespace, r.namespace) = cast(:namespace as text)
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
      and (cast(:namespace as text) is null or m.namespace = cast(:namespace as text))
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


def collect(settings: Settings, namespace: str | None = None) -> PipelineStatus:
    """Read the pipeline's state in one transaction (of one namespace, when given; runs that span every
    namespace are then left out)."""
    scope = {"namespace": namespace}
    with engine_for(settings).connect() as conn:

        def rows(statement: Any, **extra: Any) -> list[dict[str, Any]]:
            return [dict(r) for r in conn.execute(statement, {**scope, **extra}).mappings()]

        return PipelineStatus(
            watermarks=rows(SELECT_WATERMARKS, limit=WATERMARK_LIMIT),
            watermark_total=conn.execute(COUNT_WATERMARKS, scope).scalar_one(),
            last_runs=rows(SELECT_LAST_RUNS),
            quarantine=rows(SELECT_QUARANTINE_RATE),
            due_partitions=rows(SELECT_DUE_PARTITIONS),
        )


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M") if value is not None else "-"


def render(status: PipelineStatus) -> str:
    """Plain-text tables for the terminal."""
    lines = ["Last run per flow:"]
    for run in status.last_runs:
        failed = f", {run['units_failed']} failed unit(s)" if run["units_failed"] else ""
        lines.append(
            f"  {run['flow']:12} {run['status']:21} started {_when(run['started_at'])}"
            f"  finished {_when(run['finished_at'])}  ({run['runs']} runs{failed})"
        )
        if run["error"]:
            lines.append(f"      error: {run['error'][:ERROR_CHARS]}")
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
