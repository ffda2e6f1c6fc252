"""Run bookkeeping tasks: open a pipeline run, close it and publish its artifacts, and the flows' failure
hook (the logic is strataflow/pipeline/runs.py and run_summary.py; planning is tasks/plans.py)."""

from __future__ import annotations

import uuid
from datetime import date
from typing import Any

from prefect import task
from prefect.artifacts import create_markdown_artifact, create_table_artifact
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run

from models.params import BackfillPlan, RunSummary
from strataflow import telemetry
from strataflow.config import Settings, load_settings
from strataflow.db.engine import engine_for
from strataflow.ops import alerts, run_metrics
from strataflow.pipeline import runs
from strataflow.pipeline.run_summary import close_run, counts_table, summary_markdown
from tasks.concurrency import ensure_llm_limit


def mark_run_failed(flow: Any, flow_run: Any, state: Any) -> None:
    """Flow hook (failure or crash): close the run's pipeline_runs row as failed (crashed, when Prefect says
    the run crashed) with the state's message."""
    status = runs.CRASHED if state.is_crashed() else runs.FAILED
    settings = load_settings()
    runs.fail_flow_run(engine_for(settings), flow_run.id, state.message or state.name, status)
    run_metrics.write_textfile(settings)


@task(name="begin-run", retries=2, retry_delay_seconds=[2, 10], cache_policy=NO_CACHE)
def begin_run(
    settings: Settings, flow: str, parameters: dict[str, Any], namespace: str | None = None
) -> uuid.UUID:
    """Record the pipeline run (linked to this Prefect flow run) and make sure the `llm` limit exists."""
    telemetry.configure_from(settings, "strataflow-flows")  # spans of the stages, when OTLP is configured
    if settings.llm_limit_strict:
        ensure_llm_limit(settings.llm_concurrency)
    run_id = runs.start_run(
        engine_for(settings), flow, parameters, namespace, prefect_flow_run_id=flow_run.id
    )
    if flow_run.id:
        alerts.tag_flow_run(flow_run.id, run_id)  # an alert on this flow run names the strataflow run
    return run_id


@task(name="finish-run", retries=2, retry_delay_seconds=[2, 10], cache_policy=NO_CACHE)
def finish_run(
    settings: Settings,
    flow: str,
    run_id: uuid.UUID,
    stages: dict[str, list[Any]],
    days: int = 0,
    weeks: int = 0,
    run_date: date | None = None,
    plan: BackfillPlan | None = None,
) -> RunSummary:
    """Close the pipeline run with its counts and final state; publish the summary and counts artifacts."""
    prefect_id = str(flow_run.id) if flow_run.id else None
    summary = close_run(
        engine_for(settings), flow, run_id, stages, prefect_flow_run_id=prefect_id,
        days=days, weeks=weeks, run_date=run_date, plan=plan,
    )  # fmt: skip
    create_markdown_artifact(
        summary_markdown(summary), key=f"{flow}-summary", description=f"{flow} run summary"
    )
    create_table_artifact(
        counts_table(summary.counts), key=f"{flow}-counts", description=f"{flow} run counts"
    )
    previous = runs.previous_state(engine_for(settings), run_id)
    alerts.emit_run_events(summary, previous)  # strataflow.run.completed[_with_errors|recovered]
    run_metrics.write_textfile(settings)
    return summary
