"""The analytics flow: `dbt build` of analytics/ (the marts in schema analytics) as a run of its own.

The weekly flow runs the same task itself when STRATAFLOW_ANALYTICS_AFTER_WEEKLY is set; this flow is for
a deployment chained to the weekly's `strataflow.run.completed` event (docs/deployments.md) or run by hand.
"""

from __future__ import annotations

from prefect import flow

from flows.tracing import trace_flow_runs
from models.params import AnalyticsParams, RunSummary
from strataflow.config import load_settings
from tasks.analytics import dbt_build_task
from tasks.bookkeeping import begin_run, finish_run, mark_run_failed

trace_flow_runs()  # before Prefect opens a run's span: one trace per flow run (flows/tracing.py)


@flow(name="analytics", on_failure=[mark_run_failed], on_crashed=[mark_run_failed])
def analytics(params: AnalyticsParams = AnalyticsParams()) -> RunSummary:  # noqa: B008
    """dbt build into schema analytics; dbt's results as the table artifact `analytics-build`."""
    settings = load_settings()
    run_id = begin_run(settings, "analytics", params.model_dump(mode="json"))
    built = dbt_build_task(settings, params.full_refresh)
    return finish_run(settings, "analytics", run_id, {"analytics": [built]})
