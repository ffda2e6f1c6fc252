"""Planning tasks: the day a run stands for and the days and weeks of a backfill
(strataflow/pipeline/plans.py)."""

from __future__ import annotations

from datetime import date, datetime

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.runtime import flow_run

from models.params import DayPlan
from strataflow.config import Settings
from strataflow.pipeline import plans


def logical_date(settings: Settings, run_date: date | None) -> date:
    """The day a run stands for: run_date, else the day before the run's scheduled start (in the zone)."""
    if run_date is not None:
        return run_date
    started: datetime = flow_run.scheduled_start_time  # outside a flow run: now
    return plans.day_before(settings, started)


@task(name="plan-backfill", cache_policy=NO_CACHE)
def plan_backfill(
    settings: Settings, paths: list[str], start: date, end: date
) -> tuple[list[DayPlan], list[date]]:
    """The days (with their files) and the complete ISO weeks a backfill will process, in event-time order."""
    return plans.plan_backfill(settings, paths, start, end)
