"""Time rules: naive times are read in STRATAFLOW_TIMEZONE; ISO weeks start Monday in that zone."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo


def parse_event_time(value: str | datetime, tz: ZoneInfo) -> datetime:
    """An aware datetime from ISO 8601 text or a datetime; a value without an offset is read in tz.

    Raises ValueError with the offending value when it cannot be parsed.
    """
    if isinstance(value, datetime):
        parsed = value
    else:
        raw = value.strip()
        try:
            parsed = datetime.fromisoformat(raw.replace("Z", "+00:00") if raw.endswith("Z") else raw)
        except ValueError:
            raise ValueError(f"not an ISO 8601 time: {value!r}") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=tz)
    return parsed


def week_start(moment: datetime | date, tz: ZoneInfo) -> date:
    """The Monday (in tz) of the ISO week that contains moment."""
    day = moment.astimezone(tz).date() if isinstance(moment, datetime) else moment
    return day - timedelta(days=day.weekday())


def week_bounds(monday: date, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """[start, end) of the ISO week beginning on monday, as aware datetimes in tz (DST-safe)."""
    start = datetime.combine(monday, time.min, tzinfo=tz)
    end = datetime.combine(monday + timedelta(days=7), time.min, tzinfo=tz)
    return start, end


def day_bounds(day: date, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """[start, end) of a calendar day in tz."""
    return datetime.combine(day, time.min, tzinfo=tz), datetime.combine(
        day + timedelta(days=1), time.min, tzinfo=tz
    )
