"""The dbt build of analytics/ as a Prefect task (strataflow/ops/analytics.py does the work)."""

from __future__ import annotations

from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE

from strataflow.config import Settings
from strataflow.ops import analytics


@task(name="dbt-build", cache_policy=NO_CACHE)
def dbt_build_task(settings: Settings, full_refresh: bool = False) -> dict[str, Any]:
    """`dbt build` into schema analytics; dbt's per-node results as the table artifact `analytics-build`. A
    failing node (or dbt itself failing) raises, so the Prefect run that ran dbt ends Failed with dbt's
    errors as its message, and the Failed alert fires."""
    from prefect.artifacts import create_table_artifact

    run = analytics.build(settings, full_refresh)
    create_table_artifact(
        analytics.results_table(run), key="analytics-build", description=f"{run.command}: dbt's results"
    )
    failed = run.failed()
    errors = [f"analytics: {node.name} {node.status}: {node.message}" for node in failed]
    if not run.success and not errors:
        errors = [f"analytics: {run.command} failed: {run.error}"]
    if errors:
        raise analytics.AnalyticsFailed("; ".join(errors)[:2000])
    return {"dbt_nodes": len(run.results), "dbt_failed": 0}
