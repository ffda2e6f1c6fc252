"""The reflect-insights task: L2 items not yet reflected into insights for one shard of the scopes
(strataflow/pipeline/reflect.py)."""

from __future__ import annotations

import uuid

from prefect import task
from prefect.cache_policies import NO_CACHE

from models.lifecycle import ReflectResult
from models.params import EVERY_SCOPE, Shard
from strataflow.config import Settings
from strataflow.pipeline.reflect import STAGE, reflect_pending
from strataflow.pipeline.runs import raise_if_all_failed


@task(name="reflect-insights", cache_policy=NO_CACHE)
def reflect_pending_task(
    settings: Settings,
    run_id: uuid.UUID | None = None,
    namespace: str | None = None,
    shard: Shard = EVERY_SCOPE,
) -> ReflectResult:
    """Derive insights from L2 items not yet reflected, for one shard of the scopes; raises when every scope
    failed (no task retries: the gateway retries each request)."""
    result = reflect_pending(settings, run_id=run_id, namespace=namespace, shard=shard)
    raise_if_all_failed(result, STAGE)
    return result
