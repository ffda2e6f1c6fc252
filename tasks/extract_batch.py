"""The extraction's provider batches: submit, wait (task retries poll, no request held open) and collect
(strataflow/pipeline/extract_batch.py); the answers then wait in the cache for tasks/extract.py."""

from __future__ import annotations

import math
import uuid

from prefect import task
from prefect.cache_policies import NO_CACHE

from models.results import BatchResult
from strataflow.config import Settings
from strataflow.llm.batch import BatchCollected
from strataflow.pipeline.extract_batch import (
    batch_states,
    collect_ended_batches,
    submit_extract_batch,
    waiting_batches,
)


class BatchesRunning(RuntimeError):
    """A provider batch has not ended yet (the wait task's retries poll again)."""


@task(name="submit-extract-batch", cache_policy=NO_CACHE)
def submit_extract_batch_task(
    settings: Settings, run_id: uuid.UUID, namespace: str | None = None
) -> tuple[str | None, int]:
    """Submit the extraction's pending requests as one provider batch: (batch id or None, requests)."""
    return submit_extract_batch(settings, run_id, namespace)


@task(name="wait-for-extract-batches", cache_policy=NO_CACHE)
def wait_for_extract_batches_task(settings: Settings) -> int:
    """Raise BatchesRunning while a provider batch of the extraction runs (the flow gives this task
    retries every STRATAFLOW_LLM_BATCH_POLL_S up to STRATAFLOW_LLM_BATCH_WAIT_S); the batches ended."""
    states = batch_states(settings)
    running = [state for state in states if not state.ended]
    if running:
        done = sum(state.completed + state.failed for state in running)
        total = sum(state.total for state in running)
        raise BatchesRunning(f"{len(running)} batch(es) still running: {done} of {total} requests done")
    return len(states)


def extract_batches(settings: Settings, run_id: uuid.UUID, namespace: str | None) -> BatchResult:
    """Submit, wait (polling with task retries, no request held open) and collect the provider batches of
    the extraction: the answers are then in the cache for extract_new_task(answers_only=True)."""
    batch_id, requests = submit_extract_batch_task(settings, run_id, namespace)
    result = BatchResult(batches_submitted=int(batch_id is not None), requests_submitted=requests)
    polls = max(1, math.ceil(settings.llm_batch_wait_s / settings.llm_batch_poll_s))
    waiting = wait_for_extract_batches_task.with_options(
        retries=polls, retry_delay_seconds=settings.llm_batch_poll_s
    )
    waiting(settings, return_state=True)  # a batch still running after the wait is not a failure: see below
    for collected in collect_extract_batches_task(settings):
        result.batches_collected += 1
        result.answered += collected.answered
        result.invalid += collected.invalid
        result.missing += collected.missing
    result.batches_waiting = waiting_batches(settings)  # still running: collected by the next run
    return result


@task(name="collect-extract-batches", cache_policy=NO_CACHE)
def collect_extract_batches_task(settings: Settings) -> list[BatchCollected]:
    """Read every ended extraction batch's answers into the LLM cache and ledger."""
    return collect_ended_batches(settings)
