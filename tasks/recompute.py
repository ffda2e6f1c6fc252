"""The plan-backfill-work task: a backfill dry run's plan of LLM work (strataflow/pipeline/recompute.py)."""

from __future__ import annotations

from datetime import date

from prefect import task
from prefect.artifacts import create_markdown_artifact
from prefect.cache_policies import NO_CACHE

from models.params import BackfillParams, BackfillPlan, DayPlan
from strataflow.config import Settings
from strataflow.pipeline.recompute import PLAN_ARTIFACT, plan_backfill_work, plan_markdown


@task(name="plan-backfill-work", cache_policy=NO_CACHE)
def plan_backfill_work_task(
    settings: Settings, params: BackfillParams, days: list[DayPlan], weeks: list[date]
) -> BackfillPlan:
    """A dry run's plan: the LLM work of the backfill, its tokens and cost, published as the run's
    backfill-plan markdown artifact. No model call, no write."""
    plan = plan_backfill_work(settings, params, days, weeks)
    create_markdown_artifact(
        plan_markdown(plan, settings.llm_budget_tokens),
        key=PLAN_ARTIFACT,
        description="backfill dry-run plan",
    )
    return plan
