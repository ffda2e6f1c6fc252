"""The rollup-weeks task: complete ISO weeks into L3 reports for one shard of the scopes
(strataflow/pipeline/rollup.py)."""

from __future__ import annotations

import uuid
from datetime import date

from prefect import task
from prefect.cache_policies import NO_CACHE

from models.lifecycle import RollupResult
from models.params import EVERY_SCOPE, Recompute, Shard
from strataflow.config import Settings
from strataflow.pipeline.rollup import STAGE, rollup_weeks
from strataflow.pipeline.runs import raise_if_all_failed


@task(name="rollup-weeks", cache_policy=NO_CACHE)
def rollup_weeks_task(
    settings: Settings,
    week_start: date | None = None,
    run_id: uuid.UUID | None = None,
    namespace: str | None = None,
    shard: Shard = EVERY_SCOPE,
    recompute: Recompute | None = None,
) -> RollupResult:
    """Roll up complete ISO weeks into weekly_reports (or one week) for one shard of the scopes; raises when
    every scope-week that needed the model failed (no task retries: the gateway retries each request)."""
    result = rollup_weeks(
        settings, week_start=week_start, run_id=run_id, namespace=namespace, shard=shard, recompute=recompute
    )
    raise_if_all_failed(result, STAGE)
    return result
