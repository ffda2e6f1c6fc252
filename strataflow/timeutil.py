"""Time rules, in one place: a time without an offset is read in STRATAFLOW_TIMEZONE; a day and an ISO week
(Monday to Sunday) are taken in that zone, except the L1 partitions, which are UTC weeks. The `_sql`
functions spell the same rules for PostgreSQL, as SQL text over a column or parameter.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

WEEK = timedelta(days=7)
_WEEK_SECONDS = 7 * 86400
_EPOCH_TO_MONDAY = 3 * 86400  # 1970-01-01 was a Thursday: weeks counted from Monday 1969-12-29


def aware(moment: datetime, tz: ZoneInfo) -> datetime:
    """moment itself when it has an offset, else the same wall time in tz."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=tz)


def parse_event_time(value: str | datetime, tz: ZoneInfo) -> datetime:
    """An aware datetime from ISO 8601 text or a datetime; a value without an offset is read in tz.

    Raises ValueError with the offending value when it cannot be parsed.
    """
    if isinstance(value, datetime):
        return aware(value, tz)
    try:
        return aware(datetime.fromisoformat(value.strip()), tz)
    except ValueError:
        raise ValueError(f"not an ISO 8601 time: {value!r}") from None


def week_start(moment: datetime | date, tz: ZoneInfo | None = None) -> date:
    """The Monday of the ISO week that holds moment: a datetime's day in tz (in its own zone when tz is
    None), a date as it is."""
    if isinstance(moment, datetime):
        day = (moment.astimezone(tz) if tz is not None else moment).date()
    else:
        day = moment
    return day - timedelta(days=day.weekday())


def week_end(monday: date) -> date:
    """The Sunday (last day) of the ISO week beginning on monday."""
    return monday + timedelta(days=6)


def mondays(start: date, end: date) -> list[date]:
    """The Mondays of the ISO weeks that touch [start, end], in order."""
    found, monday = [], week_start(start)
    while monday <= end:
        found.append(monday)
        monday += WEEK
    return found


def week_bounds(monday: date, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """[start, end) of the ISO week beginning on monday, as aware datetimes in tz (DST-safe)."""
    return day_bounds(monday, tz)[0], day_bounds(monday + WEEK, tz)[0]


def day_bounds(day: date, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """[start, end) of a calendar day in tz."""
    start = datetime.combine(day, time.min, tzinfo=tz)
    return start, datetime.combine(day + timedelta(days=1), time.min, tzinfo=tz)


def utc_week_starts(times: Iterable[datetime]) -> list[datetime]:
    """The distinct UTC ISO weeks of aware datetimes (the L1 partitions), as their Monday 00:00 UTC, in
    order: week_bounds(week_start(t, UTC), UTC)[0] of each, in integer arithmetic (the bulk ingest asks for
    every row)."""
    weeks = {(int(moment.timestamp()) + _EPOCH_TO_MONDAY) // _WEEK_SECONDS for moment in times}
    return [datetime.fromtimestamp(week * _WEEK_SECONDS - _EPOCH_TO_MONDAY, UTC) for week in sorted(weeks)]


# -- the same rules in SQL. tz: an SQL expression naming the zone (default: the bound parameter :tz), or None
# for the session's TimeZone, which every engine connection sets to STRATAFLOW_TIMEZONE (db/engine.py).


def local_time_sql(moment: str, tz: str | None = ":tz") -> str:
    """SQL of the wall time of a timestamptz expression in tz."""
    return moment if tz is None else f"({moment} at time zone {tz})"


def local_day_sql(moment: str, tz: str | None = ":tz") -> str:
    """SQL of the calendar day (a date) of a timestamptz expression in tz."""
    return f"cast({local_time_sql(moment, tz)} as date)"


def week_start_sql(moment: str, tz: str | None = ":tz") -> str:
    """SQL of week_start: the Monday (a date) of the ISO week holding a timestamptz expression, in tz."""
    return f"cast(date_trunc('week', {local_time_sql(moment, tz)}) as date)"


def week_bounds_sql(monday: str, tz: str = ":tz") -> tuple[str, str]:
    """SQL of week_bounds: [start, end) timestamptz of the ISO week beginning on a date expression, in tz."""
    return (
        f"(cast({monday} as timestamp) at time zone {tz})",
        f"(cast({monday} + 7 as timestamp) at time zone {tz})",
    )
