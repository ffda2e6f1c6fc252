"""The weekly flow: roll up complete ISO weeks into L3, reflect insights, embed the new reports.

With STRATAFLOW_ANALYTICS_AFTER_WEEKLY=true it then runs `dbt build` of analytics/ (the marts in schema
analytics), with dbt's results as the table artifact `analytics-build`.

Rollup and reflection fan out: one task run per shard of the scopes (one per Dask worker with
STRATAFLOW_TASK_RUNNER=dask, else one), each scope-week done once whoever does it.
"""

from __future__ import annotations

from prefect import flow

from flows.tracing import trace_flow_runs
from models.params import RunSummary, WeeklyParams
from strataflow.config import load_settings
from strataflow.ops.flow_runner import configured_task_runner
from tasks.analytics import dbt_build_task
from tasks.bookkeeping import begin_run, finish_run, mark_run_failed
from tasks.concurrency import fan_out, llm_slot
from tasks.embed import embed_pending_task
from tasks.reflect import reflect_pending_task
from tasks.rollup import rollup_weeks_task

trace_flow_runs()  # before Prefect opens a run's span: one trace per flow run (flows/tracing.py)


@flow(
    name="weekly",
    task_runner=configured_task_runner(),
    on_failure=[mark_run_failed],
    on_crashed=[mark_run_failed],
)
def weekly(params: WeeklyParams = WeeklyParams()) -> RunSummary:  # noqa: B008
    """Roll up every complete week not yet reported (or one week), reflect insights, embed reports."""
    settings = load_settings()
    run_id = begin_run(settings, "weekly", params.model_dump(mode="json"), params.namespace)
    with llm_slot(settings):
        rolled = fan_out(
            rollup_weeks_task,
            settings,
            "rollup-weeks",
            week_start=params.week_start,
            run_id=run_id,
            namespace=params.namespace,
        )
        reflected = fan_out(
            reflect_pending_task, settings, "reflect-insights", run_id=run_id, namespace=params.namespace
        )
    embedded = embed_pending_task(settings, namespace=params.namespace)
    stages = {"rollup": rolled, "reflect": reflected, "embed": [embedded]}
    if settings.analytics_after_weekly:
        stages["analytics"] = [dbt_build_task(settings)]
    return finish_run(settings, "weekly", run_id, stages)
