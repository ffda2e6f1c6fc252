"""STRATAFLOW_TASK_RUNNER=dask: the nightly flow's extraction and the weekly flow's rollup and reflection run
on two local Dask worker processes (one shard of the scopes each) and write the same L2 items and the same
weekly reports as the default runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from models.params import NightlyParams, WeeklyParams

SELECT_ITEMS = text(
    """
    select subject_id, kind, key, value, statement from memory_items
    where namespace = :ns and kind <> 'hot_summary' and status = 'active'
    order by subject_id, kind, key
    """
)

SELECT_REPORTS = text(
    """
    select subject_id, week_start, summary, key_events from weekly_reports
    where namespace = :ns order by subject_id, week_start
    """
)
SELECT_SOURCE_IDS = text("select message_id, source_message_id from message_keys where namespace = :ns")


def _reports(engine: Engine, namespace: str) -> list[tuple[Any, ...]]:
    """The namespace's reports with each key event's message ids written as source message ids (ids differ
    between namespaces; the source ids are the same)."""
    with engine.connect() as conn:
        source = {row[0]: row[1] for row in conn.execute(SELECT_SOURCE_IDS, {"ns": namespace})}
        rows = conn.execute(SELECT_REPORTS, {"ns": namespace}).all()

    return [
        (
            row.subject_id,
            row.week_start,
            row.summary,
            [(event["event"], [source[i] for i in event["message_ids"]]) for event in row.key_events],
        )
        for row in rows
    ]


def _items(engine: Engine, namespace: str) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(SELECT_ITEMS, {"ns": namespace})]


def test_extraction_and_rollup_over_two_dask_workers_give_the_same_rows_as_the_default_runner(
    prefect_harness: None,
    engine: Engine,
    tmp_path: Path,
    write_daily_logs: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flows.nightly import nightly
    from flows.weekly import weekly
    from strataflow.config import load_settings
    from strataflow.ops.flow_runner import with_runner

    write_daily_logs(tmp_path / "logs")
    default_ns, dask_ns = "t_default_" + tmp_path.name[-8:], "t_dask_" + tmp_path.name[-8:]
    state = nightly(NightlyParams(paths=[str(tmp_path / "logs")], namespace=default_ns), return_state=True)
    assert state.is_completed(), state.message
    state = weekly(WeeklyParams(namespace=default_ns), return_state=True)
    assert state.is_completed(), state.message

    monkeypatch.setenv("STRATAFLOW_TASK_RUNNER", "dask")
    monkeypatch.setenv("STRATAFLOW_DASK_WORKERS", "2")
    dask_nightly = with_runner(nightly, load_settings())
    assert type(dask_nightly.task_runner).__name__ == "DaskTaskRunner"
    state = dask_nightly(NightlyParams(paths=[str(tmp_path / "logs")], namespace=dask_ns), return_state=True)
    assert state.is_completed(), state.message
    summary = state.result()
    dask_weekly = with_runner(weekly, load_settings())
    state = dask_weekly(WeeklyParams(namespace=dask_ns), return_state=True)
    assert state.is_completed(), state.message
    week = state.result()

    assert summary.stages["extract"]["scopes"] == 2  # both scopes, split between the two shards
    assert _items(engine, dask_ns) == _items(engine, default_ns) != []
    assert (week.counts.weekly_reports_written, week.stages["rollup"]["weeks_considered"]) == (4, 4)
    assert _reports(engine, dask_ns) == _reports(engine, default_ns) != []
