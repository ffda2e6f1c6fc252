"""The nightly flow: ingest the night's logs, embed, extract L2, refresh hot memory, expire old L1.

Its logical date D (params.run_date, default: the day before the scheduled start) picks D's files from the
inbox and is stamped on the run's record and summary.
"""

from __future__ import annotations

from prefect import flow

from flows.incremental import fresh_stages
from flows.tracing import trace_flow_runs
from models.params import NightlyParams, RunSummary
from strataflow.config import load_settings
from strataflow.ops.flow_runner import configured_task_runner
from strataflow.pipeline.plans import log_paths
from tasks.bookkeeping import begin_run, finish_run, mark_run_failed
from tasks.expire import expire_l1_task
from tasks.plans import logical_date

trace_flow_runs()  # before Prefect opens a run's span: one trace per flow run (flows/tracing.py)


@flow(
    name="nightly",
    task_runner=configured_task_runner(),
    on_failure=[mark_run_failed],
    on_crashed=[mark_run_failed],
)
def nightly(params: NightlyParams = NightlyParams()) -> RunSummary:  # noqa: B008
    """Ingest the night's logs, embed and extract them, refresh hot memory, embed new items, expire L1."""
    settings = load_settings()
    run_date = logical_date(settings, params.run_date)
    recorded = {**params.model_dump(mode="json"), "run_date": run_date.isoformat()}
    run_id = begin_run(settings, "nightly", recorded, params.namespace)
    paths = log_paths(settings, params.paths, run_date)
    stages = fresh_stages(settings, paths, params.namespace, run_id, params.llm_batch)  # as the incremental
    expired = expire_l1_task(settings, dry_run=params.dry_run, run_id=run_id, namespace=params.namespace)
    stages["expire"] = [expired]
    return finish_run(settings, "nightly", run_id, stages, run_date=run_date)
