"""The incremental flow: every few minutes, what the nightly does for freshness, without expiry.

It ingests the inbox's new files (every file, whatever its date: one ingested unchanged before is skipped
by its checksum), embeds, extracts L2 from the messages past the extraction watermarks, refreshes the hot
memory of the scopes that changed and embeds the new items. It shares the nightly's watermarks and
per-scope locks (the stages are the same tasks), so the two never do the same work twice: at 02:00 the
nightly finds the day's messages already extracted and makes no LLM call for them; the nightly keeps
expiry. prefect.yaml schedules it every 10 minutes (deployment `incremental`).
"""

from __future__ import annotations

import uuid
from typing import Any

from prefect import flow

from flows.tracing import trace_flow_runs
from models.params import IncrementalParams, RunSummary
from strataflow.config import Settings, load_settings
from strataflow.ops.flow_runner import configured_task_runner
from strataflow.pipeline.plans import log_paths
from tasks.bookkeeping import begin_run, finish_run, mark_run_failed
from tasks.concurrency import fan_out, llm_slot
from tasks.embed import embed_pending_task
from tasks.extract import extract_new_task
from tasks.extract_batch import extract_batches
from tasks.hot_memory import refresh_hot_memory_task
from tasks.ingest import ingest_logs_task

trace_flow_runs()  # before Prefect opens a run's span: one trace per flow run (flows/tracing.py)


def fresh_stages(
    settings: Settings,
    paths: list[str],
    namespace: str | None,
    run_id: uuid.UUID,
    llm_batch: bool = False,
) -> dict[str, list[Any]]:
    """Ingest paths, embed, extract L2 from new messages, refresh hot memory, embed the new items: the stages
    the incremental and the nightly share (the nightly adds expiry). llm_batch: the extraction's requests
    go through the provider's batch API first (tasks/extract_batch.py extract_batches), then its answers are
    applied."""
    ingested = ingest_logs_task(settings, paths, namespace=namespace, run_id=run_id)
    embedded = embed_pending_task(settings, namespace=namespace)
    stages: dict[str, list[Any]] = {}
    if llm_batch:  # outside the llm slot: waiting for the provider holds no request open
        stages["batch"] = [extract_batches(settings, run_id, namespace)]
    with llm_slot(settings):
        scope = {"run_id": run_id, "namespace": namespace}
        extracted = fan_out(extract_new_task, settings, "extract-new", answers_only=llm_batch, **scope)
        hot = fan_out(refresh_hot_memory_task, settings, "refresh-hot-memory", **scope)
    embedded_memory = embed_pending_task(settings, namespace=namespace)  # the new L2 items
    return {
        "ingest": [ingested],
        "embed": [embedded, embedded_memory],
        **stages,
        "extract": extracted,
        "hot_memory": hot,
    }


@flow(
    name="incremental",
    task_runner=configured_task_runner(),
    on_failure=[mark_run_failed],
    on_crashed=[mark_run_failed],
)
def incremental(params: IncrementalParams = IncrementalParams()) -> RunSummary:  # noqa: B008
    """Ingest new inbox files, embed them, extract L2 from new messages, refresh hot memory, embed items."""
    settings = load_settings()
    run_id = begin_run(settings, "incremental", params.model_dump(mode="json"), params.namespace)
    paths = log_paths(settings, params.paths)  # the whole inbox: unchanged files are skipped by checksum
    stages = fresh_stages(settings, paths, params.namespace, run_id)
    return finish_run(settings, "incremental", run_id, stages)
