"""The assets flow: ingest data assets (docs, tables) into long-term memory and embed their chunks."""

from __future__ import annotations

from prefect import flow

from flows.tracing import trace_flow_runs
from models.params import AssetsParams, RunSummary
from strataflow.config import load_settings
from strataflow.pipeline.plans import asset_paths
from tasks.assets import ingest_assets_task
from tasks.bookkeeping import begin_run, finish_run, mark_run_failed
from tasks.embed import embed_pending_task

trace_flow_runs()  # before Prefect opens a run's span: one trace per flow run (flows/tracing.py)


@flow(name="assets", on_failure=[mark_run_failed], on_crashed=[mark_run_failed])
def assets(params: AssetsParams = AssetsParams()) -> RunSummary:  # noqa: B008
    """Ingest new or changed assets (unchanged ones are skipped) and embed their chunks."""
    settings = load_settings()
    run_id = begin_run(settings, "assets", params.model_dump(mode="json"), params.namespace)
    ingested = ingest_assets_task(
        settings, asset_paths(settings, params.paths), params.namespace, run_id=run_id
    )
    embedded = embed_pending_task(settings, namespace=params.namespace)
    return finish_run(settings, "assets", run_id, {"assets": [ingested], "embed": [embedded]})
