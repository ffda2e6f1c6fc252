"""How the flows spread LLM work: the Prefect global concurrency limit `llm` and the fan-out of a stage task
over the shards of the scopes (strataflow/pipeline/run_summary.py shards)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
from prefect.concurrency.sync import concurrency
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

from strataflow.config import Settings
from strataflow.pipeline.run_summary import shards

LLM_LIMIT = "llm"


def ensure_llm_limit(limit: int) -> None:
    """Create the global concurrency limit `llm` on the current Prefect API when it does not exist yet."""
    with get_client(sync_client=True) as client:
        try:
            client.read_global_concurrency_limit_by_name(LLM_LIMIT)
        except ObjectNotFound:
            try:
                client.create_global_concurrency_limit(
                    GlobalConcurrencyLimitCreate(name=LLM_LIMIT, limit=limit)
                )
            except ObjectAlreadyExists:  # another run created it meanwhile
                pass


@contextmanager
def llm_slot(settings: Settings) -> Iterator[None]:
    """Hold one slot of the Prefect global concurrency limit `llm` around an LLM stage."""
    with concurrency(LLM_LIMIT, occupy=1, strict=settings.llm_limit_strict):
        yield


def fan_out(stage_task: Any, settings: Settings, name: str, **arguments: Any) -> list[Any]:
    """Submit stage_task(settings, shard=..., **arguments) once per shard (each its own task run, named
    name-1of2, ...) and wait for their results, in shard order."""
    futures = []
    for shard in shards(settings):
        part = stage_task.with_options(task_run_name=f"{name}-{shard.index + 1}of{shard.count}")
        futures.append(part.submit(settings, shard=shard, **arguments))
    return [future.result() for future in futures]
