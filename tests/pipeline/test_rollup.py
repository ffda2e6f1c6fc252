"""Weekly rollup: ISO weeks in the configured zone, idempotent reruns, late backfills, budget stops."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from sqlalchemy import text

from strataflow.memory.store import upsert_item
from strataflow.pipeline.expire import expire_l1
from strataflow.pipeline.rollup import rollup_weeks, sample_for_prompt

SELECT_REPORTS = text(
    """
    select subject_id, week_start, week_end, summary, key_events, metrics, input_hash, source_message_ids,
           updated_at, prompt_version, model, run_id, fts is not null as has_fts
    from weekly_reports where namespace = :ns order by subject_id, week_start
    """
)


def reports(engine, namespace):
    with engine.connect() as conn:
        return list(conn.execute(SELECT_REPORTS, {"ns": namespace}))


def utc(text_value: str) -> datetime:
    return datetime.fromisoformat(text_value).replace(tzinfo=UTC)


@pytest.mark.parametrize(
    ("zone", "before", "after", "week_before", "week_after"),
    [
        # Berlin leaves summer time that Sunday: 22:30Z is Sunday 23:30 CET, 23:30Z is already Monday 00:30.
        ("Europe/Berlin", "2024-10-27T22:30", "2024-10-27T23:30", date(2024, 10, 21), date(2024, 10, 28)),
        # New York springs forward that Sunday (UTC-4 from then): 03:30Z is Sunday 23:30 EDT, 04:30Z Monday.
        ("America/New_York", "2024-03-11T03:30", "2024-03-11T04:30", date(2024, 3, 4), date(2024, 3, 11)),
        # Shanghai is UTC+8 all year: Sunday 23:30 local is 15:30Z the same day, while UTC is still in Sunday.
        ("Asia/Shanghai", "2024-03-10T15:30", "2024-03-10T16:30", date(2024, 3, 4), date(2024, 3, 11)),
    ],
)
def test_weeks_run_monday_to_sunday_in_the_configured_zone(
    engine, zoned, add_messages, namespace, zone, before, after, week_before, week_after
):
    settings = zoned(zone)
    late_sunday = add_messages(
        namespace, "u1", [(utc(before), "user", "I moved to a new flat on Sunday night.")]
    )
    early_monday = add_messages(namespace, "u1", [(utc(after), "user", "On Monday I started the new job.")])

    result = rollup_weeks(settings, namespace=namespace)

    assert result.reports_written == 2 and result.weeks == [week_before, week_after]
    rows = reports(engine, namespace)
    assert [(r.week_start, r.week_end, r.source_message_ids) for r in rows] == [
        (week_before, week_before + timedelta(days=6), late_sunday),
        (week_after, week_after + timedelta(days=6), early_monday),
    ]
    assert all(r.metrics["messages_total"] == 1 and r.metrics["active_days"] == 1 for r in rows)
    assert all(r.metrics["messages_by_role"] == {"user": 1} for r in rows)


def test_an_explicit_week_start_rolls_up_the_week_holding_that_day(
    settings, engine, add_messages, namespace, old_monday
):
    ids = add_messages(
        namespace, "u1", [(old_monday + timedelta(days=2, hours=9), "user", "We chose Postgres.")]
    )
    add_messages(namespace, "u1", [(old_monday + timedelta(days=9), "user", "Next week's message.")])

    result = rollup_weeks(settings, week_start=(old_monday + timedelta(days=6)).date(), namespace=namespace)

    assert (result.weeks_considered, result.reports_written) == (1, 1)
    (row,) = reports(engine, namespace)
    assert (row.week_start, row.source_message_ids, row.prompt_version, row.has_fts) == (
        old_monday.date(),
        ids,
        "rollup-v2",
        True,
    )
    assert row.summary.strip() and row.model == settings.rollup_model


def test_rerunning_an_unchanged_week_writes_nothing_and_calls_no_model(
    settings, engine, add_messages, namespace, old_monday, ledger_count
):
    for week in range(2):
        start = old_monday + timedelta(weeks=week)
        add_messages(
            namespace,
            "u1",
            [
                (start + timedelta(hours=10), "user", f"I work as a nurse in week {week}."),
                (start + timedelta(days=1, hours=10), "assistant", "Thanks, noted."),
            ],
        )
    add_messages(namespace, "u1", [(datetime.now(UTC), "user", "This week is not complete yet.")])

    first = rollup_weeks(settings, namespace=namespace)
    before, calls = reports(engine, namespace), ledger_count(namespace)
    second = rollup_weeks(settings, namespace=namespace)

    assert (first.reports_written, [r.week_start for r in before]) == (
        2,
        [old_monday.date(), (old_monday + timedelta(weeks=1)).date()],
    )
    assert calls >= 2
    assert (second.weeks_considered, second.reports_written, second.metrics_refreshed) == (0, 0, 0)
    assert ledger_count(namespace) == calls
    assert reports(engine, namespace) == before
    explicit = rollup_weeks(settings, week_start=old_monday.date(), namespace=namespace)
    assert (explicit.reports_written, explicit.unchanged, ledger_count(namespace)) == (0, 1, calls)


def test_a_late_backfill_rolls_its_week_up_again(
    settings, engine, add_messages, namespace, old_monday, ledger_count
):
    first_ids = add_messages(
        namespace, "u1", [(old_monday + timedelta(hours=8), "user", "I live in Hangzhou.")]
    )
    add_messages(namespace, "u1", [(old_monday + timedelta(weeks=1, hours=8), "user", "Still in Hangzhou.")])
    rollup_weeks(settings, namespace=namespace)
    before = {r.week_start: r for r in reports(engine, namespace)}
    calls = ledger_count(namespace)

    late = add_messages(
        namespace, "u1", [(old_monday + timedelta(days=3), "user", "I moved to Shenzhen last week.")]
    )
    result = rollup_weeks(settings, namespace=namespace)

    after = {r.week_start: r for r in reports(engine, namespace)}
    assert (result.weeks_considered, result.reports_written, result.weeks) == (1, 1, [old_monday.date()])
    assert after[old_monday.date()].source_message_ids == first_ids + late
    assert after[old_monday.date()].input_hash != before[old_monday.date()].input_hash
    assert after[old_monday.date()].metrics["messages_total"] == 2
    second_week = (old_monday + timedelta(weeks=1)).date()
    assert after[second_week] == before[second_week]
    assert ledger_count(namespace) > calls


def test_a_spent_budget_stops_the_rollup_cleanly(
    settings, engine, add_messages, namespace, old_monday, ledger_count
):
    add_messages(namespace, "u1", [(old_monday + timedelta(hours=8), "user", "I prefer email.")])

    result = rollup_weeks(settings.model_copy(update={"llm_budget_tokens": 0}), namespace=namespace)

    assert (result.budget_stopped, result.reports_written, ledger_count(namespace)) == (True, 0, 0)
    assert reports(engine, namespace) == []
    assert rollup_weeks(settings, namespace=namespace).reports_written == 1  # the next run resumes


def test_a_long_week_keeps_user_messages_first_and_time_order():
    records = [
        {"id": i, "role": "user" if i % 3 == 0 else "assistant", "time": "t", "text": "x" * 50}
        for i in range(30)
    ]

    sampled = sample_for_prompt(records, budget_chars=1300)

    ids = [r["id"] for r in sampled]
    assert ids == sorted(ids)
    assert {i for i in range(0, 30, 3)} <= set(ids)  # all ten user messages fit and are kept
    assert 10 < len(ids) < 30
    assert sample_for_prompt(records[:3], budget_chars=10_000) == records[:3]


def test_metrics_count_the_weeks_l2_changes_and_messages_by_role(
    settings, engine, add_messages, namespace, old_monday
):
    ids = add_messages(
        namespace,
        "u1",
        [
            (old_monday + timedelta(hours=9), "user", "I am 41 years old."),
            (old_monday + timedelta(hours=10), "assistant", "Thanks."),
            (old_monday + timedelta(days=2, hours=9), "user", "Actually I am 42 years old."),
        ],
    )
    with engine.begin() as conn:
        for value, message_id, day in ((41, ids[0], 0), (42, ids[2], 2)):
            upsert_item(
                conn, namespace=namespace, subject_id="u1", kind="fact", key="age", value=value,
                statement=f"I am {value} years old.", event_at=old_monday + timedelta(days=day, hours=9),
                source_message_ids=[message_id],
            )  # fmt: skip

    rollup_weeks(settings, namespace=namespace)

    (row,) = reports(engine, namespace)
    metrics = {key: row.metrics[key] for key in ("messages_total", "messages_live", "active_days")}
    assert metrics == {"messages_total": 3, "messages_live": 3, "active_days": 2}
    assert row.metrics["messages_by_role"] == {"user": 2, "assistant": 1}
    assert (row.metrics["items_created"], row.metrics["items_changed"], row.metrics["items_deleted"]) == (
        1,
        1,
        0,
    )


def test_a_backfill_into_a_partly_expired_week_keeps_the_expired_messages_events(
    settings, engine, add_messages, namespace, old_monday
):
    (expired,) = add_messages(
        namespace, "u1", [(old_monday + timedelta(hours=9), "user", "I work as a nurse.")]
    )
    live = add_messages(
        namespace,
        "u1",
        [(old_monday + timedelta(days=1), "user", "We decided to move to Berlin next year.")],
        expires_at=datetime.now(UTC) + timedelta(days=30),
    )
    rollup_weeks(settings, namespace=namespace)
    (old,) = reports(engine, namespace)
    assert expire_l1(settings, namespace=namespace).deleted_rows == 1

    late = add_messages(
        namespace,
        "u1",
        [(old_monday + timedelta(days=2), "user", "My sister lives in Berlin already.")],
        expires_at=datetime.now(UTC) + timedelta(days=30),
    )
    result = rollup_weeks(settings, namespace=namespace)

    (new,) = reports(engine, namespace)
    assert (result.reports_written, new.source_message_ids) == (1, [expired, *live, *late])
    assert (new.metrics["messages_total"], new.metrics["messages_live"]) == (3, 2)
    only_expired = [event for event in old.key_events if set(event["message_ids"]) == {expired}]
    assert all(event in new.key_events for event in only_expired)


def test_a_week_where_the_user_said_a_thing_twice_repeats_no_bullet_and_no_event(
    engine, settings, add_messages, namespace
):
    said = "I moved to Porto last spring and now work as a nurse at the city hospital."
    ids = add_messages(
        namespace,
        "u1",
        [
            (utc("2026-11-02T10:00"), "user", said),
            (utc("2026-11-03T10:00"), "user", said),  # said again the next day, as users do
            (utc("2026-11-04T10:00"), "user", "I prefer short answers in plain text."),
        ],
    )

    rollup_weeks(settings, namespace=namespace)

    (report,) = reports(engine, namespace)
    bullets = [line[2:].strip() for line in report.summary.splitlines() if line.startswith("- ")]
    assert bullets and len(bullets) == len(set(bullets)), report.summary
    events = [event["event"] for event in report.key_events]
    assert len(events) == len(set(events)), events
    porto = next(event for event in report.key_events if event["event"] == f"user: {said}")
    assert porto["message_ids"] == ids[:2]  # one event resting on both messages
