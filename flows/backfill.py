"""The backfill flow: the nightly stages day by day, then the weekly ones week by week, in event-time order.

Every day and week is a set of task runs inside this one flow run. Hot memory is refreshed once after the
last day and insights are reflected once after the last week (both summarise the latest state); expiry,
when chosen, runs last.
"""

from __future__ import annotations

import uuid
from datetime import date
from typing import Any, cast

from prefect import flow
from prefect.artifacts import create_progress_artifact, update_progress_artifact

from models.params import BackfillParams, DayPlan, RunSummary, Stage
from strataflow.config import Settings, load_settings
from tasks.bookkeeping import begin_run, extract_fanout, finish_run, llm_slot, mark_run_failed, plan_backfill
from tasks.embed import embed_pending_task
from tasks.expire import expire_l1_task
from tasks.extract import extract_new_task, refresh_hot_memory_task
from tasks.ingest import ingest_logs_task
from tasks.reflect import reflect_pending_task
from tasks.rollup import rollup_weeks_task

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
        extract = extract_new_task.with_options(task_run_name=f"extract-new-{plan.day}")
        with llm_slot(settings):
            futures = [
                extract.submit(settings, run_id=run_id, namespace=params.namespace)
                for _ in range(extract_fanout(settings))
            ]
            results["extract"].extend(future.result() for future in futures)


def run_week(
    settings: Settings, monday: date, params: BackfillParams, run_id: uuid.UUID, results: Results
) -> None:
    """One complete ISO week: the weekly rollup."""
    if Stage.rollup in params.stages:
        rollup = rollup_weeks_task.with_options(task_run_name=f"rollup-weeks-{monday}")
        with llm_slot(settings):
            results["rollup"].append(
                rollup(settings, week_start=monday, run_id=run_id, namespace=params.namespace)
            )


def run_closing(settings: Settings, params: BackfillParams, run_id: uuid.UUID, results: Results) -> None:
    """After the days and weeks: hot memory, reflection, embedding of what they wrote, expiry."""
    with llm_slot(settings):
        if Stage.hot_memory in params.stages:
            results["hot_memory"].append(
                refresh_hot_memory_task(settings, run_id=run_id, namespace=params.namespace)
            )
        if Stage.reflect in params.stages:
            results["reflect"].append(
                reflect_pending_task(settings, run_id=run_id, namespace=params.namespace)
            )
    if Stage.embed in params.stages:
        results["embed"].append(embed_pending_task(settings, namespace=params.namespace))
    if Stage.expire in params.stages:
        results["expire"].append(expire_l1_task(settings, run_id=run_id, namespace=params.namespace))


@flow(name="backfill", on_failure=[mark_run_failed], on_crashed=[mark_run_failed])
def backfill(params: BackfillParams) -> RunSummary:
    """Process [start, end]: days in order (ingest, embed, extract), then complete weeks (rollup), then
    hot memory, reflection and (when chosen) expiry. Idempotent: a rerun makes no LLM call."""
    settings = load_settings()
    run_id = begin_run(settings, "backfill", params.model_dump(mode="json"), params.namespace)
    days, weeks = plan_backfill(settings, params.paths, params.start, params.end)
    steps = len(days) + len(weeks) + 1
    progress = cast(
        uuid.UUID, create_progress_artifact(0.0, key="backfill-progress", description="days and weeks done")
    )
    results: Results = {stage.value: [] for stage in Stage}
    for number, plan in enumerate(days, start=1):
        run_day(settings, plan, params, run_id, results)
        update_progress_artifact(progress, 100.0 * number / steps)
    for number, monday in enumerate(weeks, start=len(days) + 1):
        run_week(settings, monday, params, run_id, results)
        update_progress_artifact(progress, 100.0 * number / steps)
    run_closing(settings, params, run_id, results)
    update_progress_artifact(progress, 100.0)
    return finish_run(settings, "backfill", run_id, results, days=len(days), weeks=len(weeks))
