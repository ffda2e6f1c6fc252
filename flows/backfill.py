"""The backfill flow: the nightly stages day by day, then the weekly ones week by week, in event-time order.

Every day and week is a set of task runs inside this one flow run. Hot memory is refreshed once after the
last day and insights are reflected once after the last week (both summarise the latest state); expiry,
when chosen, runs last. The LLM stages fan out over Dask workers by shard (tasks/concurrency.py fan_out).

With reprocess (or force), after the days the range's extraction is redone where another model or prompt
version produced it, the weeks' reports are rewritten and the hot summaries refreshed the same way
(strataflow/pipeline/recompute.py). A dry run only publishes the plan of that work (backfill-plan artifact,
and the run summary's `plan`): no model call, no write but the run's record.
"""

from __future__ import annotations

import uuid
from datetime import date
from typing import Any, cast

from prefect import flow
from prefect.artifacts import create_progress_artifact, update_progress_artifact

from flows.tracing import trace_flow_runs
from models.params import BackfillParams, DayPlan, Recompute, RunSummary, Stage
from strataflow.config import Settings, load_settings
from strataflow.ops.flow_runner import configured_task_runner
from strataflow.pipeline.recompute import recompute_window
from tasks.bookkeeping import begin_run, finish_run, mark_run_failed
from tasks.concurrency import fan_out, llm_slot
from tasks.embed import embed_pending_task
from tasks.expire import expire_l1_task
from tasks.extract import extract_new_task
from tasks.hot_memory import refresh_hot_memory_task
from tasks.ingest import ingest_logs_task
from tasks.plans import plan_backfill
from tasks.recompute import plan_backfill_work_task
from tasks.reflect import reflect_pending_task
from tasks.rollup import rollup_weeks_task

trace_flow_runs()  # before Prefect opens a run's span: one trace per flow run (flows/tracing.py)

Results = dict[str, list[Any]]


def run_day(
    settings: Settings, plan: DayPlan, params: BackfillParams, run_id: uuid.UUID, results: Results
) -> None:
    """One day: ingest its files, embed, extract (the chosen stages only)."""
    if Stage.ingest in params.stages and plan.paths:
        ingest = ingest_logs_task.with_options(task_run_name=f"ingest-logs-{plan.day}")
        results["ingest"].append(ingest(settings, plan.paths, namespace=params.namespace, run_id=run_id))
    if Stage.embed in params.stages:
        embed = embed_pending_task.with_options(task_run_name=f"embed-pending-{plan.day}")
        results["embed"].append(embed(settings, namespace=params.namespace))
    if Stage.extract in params.stages:
        with llm_slot(settings):
            name = f"extract-new-{plan.day}"
            results["extract"] += fan_out(
                extract_new_task, settings, name, run_id=run_id, namespace=params.namespace
            )


def run_reprocess(
    settings: Settings, recompute: Recompute, params: BackfillParams, run_id: uuid.UUID, results: Results
) -> None:
    """After the days: the range's extraction again, where the configured model or prompt did not do it."""
    if Stage.extract in params.stages:
        with llm_slot(settings):
            results["extract"] += fan_out(
                extract_new_task,
                settings,
                "reprocess-extract",
                run_id=run_id,
                namespace=params.namespace,
                recompute=recompute,
            )


def run_week(
    settings: Settings,
    monday: date,
    params: BackfillParams,
    run_id: uuid.UUID,
    results: Results,
    recompute: Recompute | None,
) -> None:
    """One complete ISO week: the weekly rollup (recomputing: also the reports another model wrote)."""
    if Stage.rollup in params.stages:
        with llm_slot(settings):
            results["rollup"] += fan_out(
                rollup_weeks_task,
                settings,
                f"rollup-weeks-{monday}",
                week_start=monday,
                run_id=run_id,
                namespace=params.namespace,
                recompute=recompute,
            )


def run_closing(
    settings: Settings,
    params: BackfillParams,
    run_id: uuid.UUID,
    results: Results,
    recompute: Recompute | None,
) -> None:
    """After the days and weeks: hot memory, reflection, embedding of what they wrote, expiry."""
    with llm_slot(settings):
        if Stage.hot_memory in params.stages:
            hot = {"run_id": run_id, "namespace": params.namespace}
            results["hot_memory"] += fan_out(refresh_hot_memory_task, settings, "refresh-hot-memory", **hot)
            if recompute is not None:
                results["hot_memory"] += fan_out(
                    refresh_hot_memory_task, settings, "reprocess-hot-memory", **hot, recompute=recompute
                )
        if Stage.reflect in params.stages:
            results["reflect"] += fan_out(
                reflect_pending_task, settings, "reflect-insights", run_id=run_id, namespace=params.namespace
            )
    if Stage.embed in params.stages:
        results["embed"].append(embed_pending_task(settings, namespace=params.namespace))
    if Stage.expire in params.stages:
        results["expire"].append(expire_l1_task(settings, run_id=run_id, namespace=params.namespace))


@flow(
    name="backfill",
    task_runner=configured_task_runner(),
    on_failure=[mark_run_failed],
    on_crashed=[mark_run_failed],
)
def backfill(params: BackfillParams) -> RunSummary:
    """Process [start, end]: days in order (ingest, embed, extract), with reprocess the range's extraction
    again, then complete weeks (rollup), then hot memory, reflection and (when chosen) expiry. Idempotent: a
    rerun makes no LLM call. A dry run only plans (no model call, no write)."""
    settings = load_settings()
    run_id = begin_run(settings, "backfill", params.model_dump(mode="json"), params.namespace)
    days, weeks = plan_backfill(settings, params.paths, params.start, params.end)
    if params.dry_run:
        plan = plan_backfill_work_task(settings, params, days, weeks)
        return finish_run(settings, "backfill", run_id, {}, days=len(days), weeks=len(weeks), plan=plan)
    recompute = recompute_window(settings, params)
    steps = len(days) + len(weeks) + 1
    progress = cast(
        uuid.UUID, create_progress_artifact(0.0, key="backfill-progress", description="days and weeks done")
    )
    results: Results = {stage.value: [] for stage in Stage}
    for number, plan_day in enumerate(days, start=1):
        run_day(settings, plan_day, params, run_id, results)
        update_progress_artifact(progress, 100.0 * number / steps)
    if recompute is not None:
        run_reprocess(settings, recompute, params, run_id, results)
    for number, monday in enumerate(weeks, start=len(days) + 1):
        run_week(settings, monday, params, run_id, results, recompute)
        update_progress_artifact(progress, 100.0 * number / steps)
    run_closing(settings, params, run_id, results, recompute)
    update_progress_artifact(progress, 100.0)
    return finish_run(settings, "backfill", run_id, results, days=len(days), weeks=len(weeks))
