"""The shared writers and rules (issue 27 item 7): time and week arithmetic in Python and in SQL agree, a
watermark's position never moves back while an ingest's state is replaced, a quarantine row holds no NUL,
and a deletion report names a subject only by its hash."""

from __future__ import annotations

import json
import random
import uuid
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import Connection, text

from strataflow.hashes import subject_hash
from strataflow.ingest.quarantine import quarantine_row, write_quarantine
from strataflow.pipeline.deletion_reports import write_deletion_report
from strataflow.pipeline.scopes import advance_watermark
from strataflow.timeutil import (
    day_bounds,
    local_day_sql,
    mondays,
    utc_week_starts,
    week_bounds,
    week_bounds_sql,
    week_end,
    week_start,
    week_start_sql,
)

ZONES = ("UTC", "Asia/Shanghai", "America/New_York", "Pacific/Auckland", "Europe/London")


def _moments(count: int) -> list[datetime]:
    rng = random.Random(27)
    start = datetime(2023, 1, 1, tzinfo=UTC)
    # around the DST changes of both hemispheres, and anywhere in two years
    edges = [datetime(2024, 3, 10, 6, 59, tzinfo=UTC), datetime(2024, 11, 3, 5, 30, tzinfo=UTC),
             datetime(2024, 4, 6, 13, 59, tzinfo=UTC), datetime(2024, 9, 28, 14, 1, tzinfo=UTC)]  # fmt: skip
    return edges + [start + timedelta(seconds=rng.randrange(2 * 365 * 86400)) for _ in range(count)]


@pytest.mark.parametrize("zone", ZONES)
def test_the_sql_week_and_day_of_a_moment_are_the_python_ones(conn: Connection, zone: str) -> None:
    tz = ZoneInfo(zone)
    moments = _moments(300)
    start, end = week_bounds_sql("w")
    rows = conn.execute(
        text(
            f"select m, w as monday, {local_day_sql('m')} as day, {start} as week_from, {end} as week_until "
            "from unnest(cast(:moments as timestamptz[])) as m, "
            f"lateral (select {week_start_sql('m')} as w) as x"
        ),
        {"moments": moments, "tz": zone},
    ).all()
    for row in rows:
        monday = week_start(row.m, tz)
        assert row.monday == monday and monday.weekday() == 0
        assert row.day == row.m.astimezone(tz).date()
        assert (row.week_from, row.week_until) == week_bounds(monday, tz)
        assert week_bounds(monday, tz)[0] <= row.m < week_bounds(monday, tz)[1]


def test_utc_week_starts_are_the_utc_weeks_of_week_start() -> None:
    moments = _moments(2000)
    expected = sorted({week_bounds(week_start(m, UTC), UTC)[0] for m in moments})
    assert utc_week_starts(moments) == expected
    assert utc_week_starts(m.astimezone(ZoneInfo("Asia/Shanghai")) for m in moments) == expected


def test_a_week_is_monday_to_sunday_and_its_bounds_follow_the_zone() -> None:
    tz = ZoneInfo("America/New_York")
    monday = week_start(date(2024, 3, 13))  # the week of the spring DST change
    assert (monday, week_end(monday)) == (date(2024, 3, 11), date(2024, 3, 17))
    start, end = week_bounds(date(2024, 3, 4), tz)  # holds the change (Sunday 10 March)
    assert end.astimezone(UTC) - start.astimezone(UTC) == timedelta(days=7, hours=-1)
    start, end = day_bounds(date(2024, 3, 10), tz)
    assert (start.hour, end.hour, end.astimezone(UTC) - start.astimezone(UTC)) == (0, 0, timedelta(hours=23))
    assert mondays(date(2024, 3, 17), date(2024, 3, 25)) == [
        date(2024, 3, 11),
        date(2024, 3, 18),
        date(2024, 3, 25),
    ]
    # a moment's week is the one of its day in the zone: Monday 01:00 in Shanghai is Sunday in UTC
    late = datetime(2024, 3, 10, 17, 0, tzinfo=UTC)
    assert (week_start(late, UTC), week_start(late, ZoneInfo("Asia/Shanghai"))) == (
        monday - timedelta(7),
        monday,
    )


def _watermark(conn: Connection, namespace: str, stage: str, scope: str) -> tuple:
    return conn.execute(
        text("select position, checksum, value from watermarks "
             "where stage = :stage and namespace = :ns and scope = :scope"),
        {"stage": stage, "ns": namespace, "scope": scope},
    ).one()  # fmt: skip


def test_a_watermarks_position_never_moves_back_and_an_ingests_state_is_replaced(conn: Connection) -> None:
    namespace = f"t_{uuid.uuid4().hex[:10]}"
    run = uuid.uuid4()
    advance_watermark(conn, "extract", namespace, "s1", run, position=9)
    advance_watermark(conn, "extract", namespace, "s1", run, position=4)  # a run that started earlier
    assert _watermark(conn, namespace, "extract", "s1")[0] == 9
    advance_watermark(conn, "extract", namespace, "s1", run, position=12)
    assert _watermark(conn, namespace, "extract", "s1")[0] == 12

    advance_watermark(conn, "ingest", namespace, "/in/a.jsonl", run, checksum="c1", value={"rows": 3})
    advance_watermark(conn, "ingest", namespace, "/in/a.jsonl", run, checksum="c2", value={"rows": 5})
    assert _watermark(conn, namespace, "ingest", "/in/a.jsonl") == (None, "c2", {"rows": 5})
    advance_watermark(conn, "ingest", namespace, "sql:src", run, value={"updated_at": "2024-01-02"})
    advance_watermark(conn, "ingest", namespace, "sql:src", run)  # nothing given: the state stays
    assert _watermark(conn, namespace, "ingest", "sql:src") == (None, None, {"updated_at": "2024-01-02"})


def test_a_quarantine_row_holds_no_nul_and_keeps_the_subject(conn: Connection) -> None:
    namespace = f"t_{uuid.uuid4().hex[:10]}"
    row = quarantine_row(
        namespace=namespace, source="bin.md", position="file", field=None, reason="unreadable",
        error="bad\x00file", raw_record="a\x00b", subject_id="u1",
    )  # fmt: skip
    write_quarantine(conn, None, [row])
    write_quarantine(conn, None, [row])  # once per record (sql/283)
    stored = conn.execute(
        text("select subject_id, position, error, raw_record from quarantine where namespace = :ns"),
        {"ns": namespace},
    ).one()
    assert tuple(stored) == ("u1", "file", "bad\\x00file", "a\\u0000b")


def test_a_deletion_report_names_a_subject_only_by_its_hash(conn: Connection) -> None:
    namespace = f"t_{uuid.uuid4().hex[:10]}"
    report_id = write_deletion_report(
        conn, uuid.uuid4(), "forget", {"total": {"removed": 2}}, namespace=namespace, subject_id="u-42"
    )
    row = conn.execute(
        text("select kind, namespace, subject_id, counts, partitions_dropped from deletion_reports "
             "where report_id = :id"), {"id": report_id},
    ).one()  # fmt: skip
    assert row.subject_id == f"sha256:{subject_hash(namespace, 'u-42')}" and "u-42" not in json.dumps(
        row.counts
    )
    assert (row.kind, row.namespace, row.partitions_dropped) == ("forget", namespace, [])
    with pytest.raises(ValueError):
        write_deletion_report(conn, None, "forget", {}, subject_id="u-42")
