"""Guarded L1 expiry: whole-partition drops, row deletes in partly live ones, the guard, force."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow.parquet as pq
import pytest
from sqlalchemy import text

from strataflow.pipeline.expire import expire_l1
from strataflow.pipeline.rollup import rollup_weeks

NOW = datetime.now(UTC)


def live_ids(engine, namespace):
    with engine.connect() as conn:
        query = text("select message_id from conversation_messages where namespace = :ns order by message_id")
        return [row.message_id for row in conn.execute(query, {"ns": namespace})]


def expired_keys(engine, namespace):
    with engine.connect() as conn:
        query = text(
            "select message_id from message_keys where namespace = :ns and expired_at is not null order by 1"
        )
        return [row.message_id for row in conn.execute(query, {"ns": namespace})]


def partition_exists(engine, monday: datetime) -> bool:
    name = "conversation_messages_w" + monday.strftime("%G_%V")
    with engine.connect() as conn:
        return conn.execute(text("select to_regclass(:name) is not null"), {"name": name}).scalar_one()


def report(engine, report_id):
    with engine.connect() as conn:
        return conn.execute(
            text("select * from deletion_reports where report_id = :id"), {"id": report_id}
        ).one()


def week_of_messages(add_messages, namespace, monday, subject="u1", count=3, expires_at=None):
    rows = [(monday + timedelta(days=i, hours=9), "user", f"Message {i} of {subject}.") for i in range(count)]
    return add_messages(namespace, subject, rows, expires_at=expires_at)


def test_a_fully_expired_rolled_up_partition_is_dropped_whole(
    settings, engine, add_messages, namespace, old_monday
):
    ids = week_of_messages(add_messages, namespace, old_monday) + week_of_messages(
        add_messages, namespace, old_monday, subject="u2", count=2
    )
    rollup_weeks(settings, namespace=namespace)

    result = expire_l1(settings, namespace=namespace)

    name = "conversation_messages_w" + old_monday.strftime("%G_%V")
    assert (result.removed_rows, result.dropped_rows, result.deleted_rows, result.guarded_rows) == (
        5,
        5,
        0,
        0,
    )
    assert result.partitions_dropped == [name]
    assert not partition_exists(engine, old_monday)
    assert live_ids(engine, namespace) == [] and expired_keys(engine, namespace) == ids
    saved = report(engine, result.report_id)
    assert (saved.kind, saved.dry_run, saved.forced, saved.partitions_dropped) == (
        "expire",
        False,
        False,
        [name],
    )
    assert saved.counts["by_namespace"][namespace]["removed"] == 5
    assert saved.oldest_event_at == old_monday + timedelta(hours=9)
    assert saved.newest_event_at == old_monday + timedelta(days=2, hours=9)


def test_a_partly_live_partition_loses_exactly_its_expired_rows(
    settings, engine, add_messages, namespace, old_monday
):
    gone = week_of_messages(add_messages, namespace, old_monday, count=2)
    kept = week_of_messages(
        add_messages, namespace, old_monday, subject="u2", count=2, expires_at=NOW + timedelta(days=3)
    )
    rollup_weeks(settings, namespace=namespace)

    result = expire_l1(settings, namespace=namespace)

    assert (result.expired_rows, result.removed_rows, result.dropped_rows, result.deleted_rows) == (
        2,
        2,
        0,
        2,
    )
    assert result.partitions_dropped == [] and partition_exists(engine, old_monday)
    assert live_ids(engine, namespace) == kept
    assert expired_keys(engine, namespace) == gone


def test_the_guard_keeps_rows_of_weeks_without_a_covering_report_until_forced(
    settings, engine, add_messages, namespace, old_monday
):
    covered = week_of_messages(add_messages, namespace, old_monday, subject="u1")
    rollup_weeks(settings, namespace=namespace)
    # A late backfill into u2's week after the rollup: that week is not covered until it is rolled up again.
    uncovered = week_of_messages(add_messages, namespace, old_monday, subject="u2", count=2)

    guarded = expire_l1(settings, namespace=namespace)

    assert (guarded.removed_rows, guarded.deleted_rows, guarded.guarded_rows) == (3, 3, 2)
    assert guarded.partitions_dropped == [] and live_ids(engine, namespace) == uncovered
    with pytest.raises(ValueError, match="reason"):
        expire_l1(settings, namespace=namespace, force=True)

    forced = expire_l1(settings, namespace=namespace, force=True, reason="subject asked for early deletion")

    assert (forced.removed_rows, forced.forced, forced.guarded_rows) == (2, True, 0)
    assert forced.by_namespace[namespace]["forced"] == 2
    assert live_ids(engine, namespace) == [] and expired_keys(engine, namespace) == covered + uncovered
    saved = report(engine, forced.report_id)
    assert (saved.forced, saved.reason) == (True, "subject asked for early deletion")


def test_rows_not_yet_rolled_up_are_never_removed_without_force(
    settings, engine, add_messages, namespace, old_monday
):
    ids = week_of_messages(add_messages, namespace, old_monday)

    result = expire_l1(settings, namespace=namespace)

    assert (result.expired_rows, result.removed_rows, result.guarded_rows) == (3, 0, 3)
    assert live_ids(engine, namespace) == ids and partition_exists(engine, old_monday)


def test_a_dry_run_reports_what_would_go_and_changes_nothing(
    settings, engine, add_messages, namespace, old_monday
):
    ids = week_of_messages(add_messages, namespace, old_monday)
    rollup_weeks(settings, namespace=namespace)

    result = expire_l1(settings, namespace=namespace, dry_run=True)

    assert (result.dry_run, result.removed_rows, len(result.partitions_dropped)) == (True, 3, 1)
    assert live_ids(engine, namespace) == ids and expired_keys(engine, namespace) == []
    assert partition_exists(engine, old_monday)
    assert report(engine, result.report_id).dry_run is True


def test_expiring_rows_are_archived_to_parquet_first(settings, engine, add_messages, namespace, old_monday):
    ids = week_of_messages(add_messages, namespace, old_monday)
    archiving = settings.model_copy(update={"archive_expired": True})
    rollup_weeks(settings, namespace=namespace)

    result = expire_l1(archiving, namespace=namespace)

    table = pq.read_table(result.archive_path).to_pylist()
    assert [row["message_id"] for row in table] == ids
    assert {row["namespace"] for row in table} == {namespace}
    assert table[0]["content"] == "Message 0 of u1."
    assert report(engine, result.report_id).archive_path == result.archive_path
