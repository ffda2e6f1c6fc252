"""The refresh-hot-memory task: seed 001 hot summaries for one shard of the scopes
(strataflow/pipeline/hot_memory.py)."""

from __future__ import annotations

import uuid

from prefect import task
from prefect.cache_policies import NO_CACHE

from models.params import EVERY_SCOPE, Recompute, Shard
from models.results import HotMemoryResult
from strataflow.config import Settings
from strataflow.pipeline.hot_memory import STAGE, refresh_hot_memory
from strataflow.pipeline.runs import raise_if_all_failed


@task(name="refresh-hot-memory", cache_policy=NO_CACHE)
def refresh_hot_memory_task(
    settings: Settings,
    run_id: uuid.UUID | None = None,
    namespace: str | None = None,
    shard: Shard = EVERY_SCOPE,
    recompute: Recompute | None = None,
) -> HotMemoryResult:
    """Refresh the seed 001 hot summary of every scope (of one namespace, when given; of one shard) with new
    messages, or recompute a window's; raises when every scope failed."""
    result = refresh_hot_memory(
        settings, run_id=run_id, namespace=namespace, shard=shard, recompute=recompute
    )
    raise_if_all_failed(result, STAGE)
    return result
