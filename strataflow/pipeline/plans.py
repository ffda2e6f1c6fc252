"""What a run works on: the input paths (given, or the inbox), the day a file belongs to, and a backfill's
days and complete ISO weeks, in event-time order.

The logical date of a run: the nightly for day D reads D's files from the inbox and stamps D on its record
and summary. Unset, D is the day before the run's scheduled start in STRATAFLOW_TIMEZONE (the day that just
ended), as a scheduler's logical date is (`day_before`; tasks/bookkeeping.py reads the scheduled start).
"""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta
from pathlib import Path

from models.params import DayPlan
from strataflow.config import Settings
from strataflow.ingest.readers import expand_paths
from strataflow.timeutil import mondays, week_end

DATE_IN_NAME = re.compile(r"(\d{4})-?(\d{2})-?(\d{2})")


def today(settings: Settings) -> date:
    """Today in STRATAFLOW_TIMEZONE."""
    return datetime.now(settings.tz).date()


def day_before(settings: Settings, started: datetime) -> date:
    """The logical date of a run scheduled to start at `started`: the day before, in the zone."""
    return started.astimezone(settings.tz).date() - timedelta(days=1)


def inbox_dir(settings: Settings) -> Path:
    return settings.inbox_dir or settings.home / "inbox"


def log_paths(settings: Settings, paths: list[str], day: date | None = None) -> list[str]:
    """The paths to ingest: the given ones as they are; else the inbox (created when missing), with `day`
    only its files dated `day` and the undated ones (a file dated another day waits for its own night)."""
    if paths:
        return list(paths)
    inbox = inbox_dir(settings)
    inbox.mkdir(parents=True, exist_ok=True)
    if day is None:
        return [str(inbox)]
    return [str(file) for file in expand_paths([str(inbox)]) if date_in_name(file) in (day, None)]


def asset_paths(settings: Settings, paths: list[str]) -> list[str]:
    """The asset paths to ingest: the given ones, or STRATAFLOW_HOME/assets."""
    if paths:
        return list(paths)
    folder = settings.home / "assets"
    folder.mkdir(parents=True, exist_ok=True)
    return [str(folder)]


def date_in_name(path: Path) -> date | None:
    """The date a file name holds (2024-03-05 or 20240305), or None."""
    match = DATE_IN_NAME.search(path.name)
    if match is None:
        return None
    try:
        return date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return None


def plan_days(paths: list[str], start: date, end: date) -> list[DayPlan]:
    """Backfill days in order: a dated file goes to its day (outside [start, end]: left out); undated files go
    to the first day. Only days with files are listed; with no files at all, the first day (embed/extract
    still run over anything ingested earlier)."""
    by_day: dict[date, list[str]] = {}
    for file in expand_paths(paths):
        day = date_in_name(file) or start
        if start <= day <= end:
            by_day.setdefault(day, []).append(str(file))
    if not by_day:
        return [DayPlan(day=start, paths=[])]
    return [DayPlan(day=day, paths=by_day[day]) for day in sorted(by_day)]


def plan_weeks(start: date, end: date, today_: date) -> list[date]:
    """Mondays of the ISO weeks touching [start, end] that are complete (their Sunday is before today)."""
    return [monday for monday in mondays(start, end) if week_end(monday) < today_]


def plan_backfill(
    settings: Settings, paths: list[str], start: date, end: date
) -> tuple[list[DayPlan], list[date]]:
    """The days (with their files) and the complete ISO weeks a backfill will process, in event-time order."""
    return plan_days(log_paths(settings, paths), start, end), plan_weeks(start, end, today(settings))
