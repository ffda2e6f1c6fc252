"""The extract-new task: new L1 messages into L2 items for one shard of the scopes
(strataflow/pipeline/extract.py); through the provider's batch API first: tasks/extract_batch.py."""

from __future__ import annotations

import uuid

from prefect import task
from prefect.cache_policies import NO_CACHE

from models.params import EVERY_SCOPE, Recompute, Shard
from models.results import ExtractResult
from strataflow.config import Settings
from strataflow.pipeline.extract import STAGE, extract_new
from strataflow.pipeline.runs import raise_if_all_failed


@task(name="extract-new", cache_policy=NO_CACHE)
def extract_new_task(
    settings: Settings,
    run_id: uuid.UUID | None = None,
    namespace: str | None = None,
    shard: Shard = EVERY_SCOPE,
    recompute: Recompute | None = None,
    answers_only: bool = False,
) -> ExtractResult:
    """Extract L2 memory from new L1 messages (or recompute a window) for one shard of the scopes; raises
    when every scope failed (no task retries: the gateway retries each request). answers_only: apply a
    provider batch's answers, send nothing."""
    result = extract_new(
        settings, run_id=run_id, namespace=namespace, progress=False, shard=shard, recompute=recompute,
        answers_only=answers_only,
    )  # fmt: skip
    raise_if_all_failed(result, STAGE)
    return result
