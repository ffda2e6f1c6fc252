"""Plain functions behind the flows: backfill plans, merged stage results, the published counts, status."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from models.params import NightlyParams, WeeklyParams
from strataflow.config import Settings
from strataflow.pipeline.plans import date_in_name, plan_days, plan_weeks
from strataflow.pipeline.run_summary import count_run, merge_results

SELECT_RUN = text("select parameters, counts from pipeline_runs where run_id = :run_id")
SELECT_CONTENTS = text("select content from conversation_messages where namespace = :ns")
NO_FIGURES = {
    "llm_calls": 0,
    "llm_tokens": 0,
    "llm_cost_usd": 0,
    "l2_new": 0,
    "l2_changed": 0,
    "hot_summaries": 0,
    "weekly_reports_written": 0,
    "insights_written": 0,
    "assets_ingested": 0,
}


def _write_message(path: Path, message_id: str, content: str, day: date) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "conversation_id": "c1",
        "subject_id": "s1",
        "source_message_id": message_id,
        "role": "user",
        "content": content,
        "created_at": datetime.combine(day, time(9), tzinfo=UTC).isoformat(),
    }
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("export-2024-03-05.jsonl", date(2024, 3, 5)),  # ISO date with dashes
        ("20240305.csv", date(2024, 3, 5)),  # compact date
        ("chat.jsonl", None),  # no date: goes to the first day
        ("dump-2024-13-45.jsonl", None),  # digits that are no date
    ],
)
def test_a_file_name_gives_its_day_when_it_holds_a_real_date(name: str, expected: date | None) -> None:
    assert date_in_name(Path(name)) == expected


def test_backfill_days_put_dated_files_on_their_day_undated_on_the_first_and_drop_the_rest(
    tmp_path: Path,
) -> None:
    for name in (
        "b-2024-03-03.jsonl",
        "a-2024-03-02.jsonl",
        "all.jsonl",
        "old-2024-01-01.jsonl",
        "notes.txt",
    ):
        (tmp_path / name).write_text("{}\n")
    plans = plan_days([str(tmp_path)], date(2024, 3, 1), date(2024, 3, 31))
    assert [(p.day, [Path(x).name for x in p.paths]) for p in plans] == [
        (date(2024, 3, 1), ["all.jsonl"]),
        (date(2024, 3, 2), ["a-2024-03-02.jsonl"]),
        (date(2024, 3, 3), ["b-2024-03-03.jsonl"]),
    ]


def test_a_backfill_with_no_files_still_runs_one_day(tmp_path: Path) -> None:
    plans = plan_days([str(tmp_path)], date(2024, 3, 1), date(2024, 3, 2))
    assert [(p.day, p.paths) for p in plans] == [(date(2024, 3, 1), [])]


@pytest.mark.parametrize(
    ("start", "end", "today", "expected"),
    [
        # a range inside one week: its Monday, once the week is over
        (date(2024, 3, 6), date(2024, 3, 7), date(2024, 3, 11), [date(2024, 3, 4)]),
        # the current week is not complete yet: left out
        (date(2024, 3, 1), date(2024, 3, 12), date(2024, 3, 13), [date(2024, 2, 26), date(2024, 3, 4)]),
        # on its Sunday a week is not complete yet
        (date(2024, 3, 4), date(2024, 3, 10), date(2024, 3, 10), []),
    ],
)
def test_backfill_weeks_are_the_complete_iso_weeks_touching_the_range(
    start: date, end: date, today: date, expected: list[date]
) -> None:
    assert plan_weeks(start, end, today) == expected


def test_results_of_several_days_are_summed_and_flags_kept() -> None:
    merged = merge_results(
        [
            {"read": 3, "inserted": 2, "budget_stopped": False},
            {"read": 4, "inserted": 0, "budget_stopped": True},
        ]
    )
    assert merged == {"read": 7, "inserted": 2, "budget_stopped": True}


def test_counts_come_from_stage_results_and_a_budget_stop_anywhere_marks_the_run() -> None:
    stages = {
        "ingest": {"read": 10, "inserted": 8, "updated": 1, "quarantined": 1},
        "embed": {"conversation_messages": 8, "memory_items": 3, "encoded": 9},
        "extract": {"budget_stopped": True},
        "expire": {"removed_rows": 5},
    }
    counts = count_run({**NO_FIGURES, "llm_calls": 2, "llm_cost_usd": "0.5"}, stages)
    assert counts.model_dump() == {
        **NO_FIGURES,
        "llm_calls": 2,
        "llm_cost_usd": 0.5,
        "rows_read": 10,
        "rows_inserted": 8,
        "rows_updated": 1,
        "rows_quarantined": 1,
        "rows_embedded": 11,
        "encodes": 9,
        "rows_expired": 5,
        "units_failed": 0,
        "budget_stopped": True,
    }


def test_parameter_models_refuse_bad_values_by_name() -> None:
    with pytest.raises(ValueError, match="Monday"):
        WeeklyParams(week_start=date(2024, 3, 6))
    with pytest.raises(ValueError, match="namespace"):
        NightlyParams(namespace="bad name; drop table")


def test_the_nightly_resolves_its_logical_date_and_reads_that_days_inbox_files_only(
    prefect_harness: None,
    engine: Engine,
    namespace: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flows.nightly import nightly

    yesterday = datetime.now(UTC).date() - timedelta(days=1)
    inbox = tmp_path / "inbox"
    files = {
        f"chat-{yesterday}.jsonl": "I moved to Lisbon last week.",  # the run's day: read
        f"chat-{yesterday - timedelta(days=3)}.jsonl": "I prefer tea over coffee.",  # another day: waits
        "export.jsonl": "We decided to ship on Friday.",  # undated: read every night
    }
    for number, (name, content) in enumerate(files.items()):
        _write_message(inbox / name, f"{namespace}-{number}", content, yesterday)
    monkeypatch.setenv("STRATAFLOW_INBOX_DIR", str(inbox))  # what the flow's load_settings reads

    state = nightly(NightlyParams(namespace=namespace), return_state=True)

    assert state.is_completed(), state.message
    summary = state.result()
    assert (summary.run_date, summary.counts.rows_inserted) == (yesterday, 2)
    with engine.connect() as conn:
        run = conn.execute(SELECT_RUN, {"run_id": summary.run_id}).mappings().one()
        contents = sorted(conn.execute(SELECT_CONTENTS, {"ns": namespace}).scalars())
    assert run["parameters"]["run_date"] == run["counts"]["run_date"] == yesterday.isoformat()
    assert contents == ["I moved to Lisbon last week.", "We decided to ship on Friday."]


def test_status_shows_a_namespaces_last_runs_with_their_errors_watermarks_and_quarantine(
    settings: Settings, engine: Engine, namespace: str, tmp_path: Path
) -> None:
    from strataflow.ops import status
    from strataflow.pipeline import runs
    from strataflow.pipeline.ingest import ingest_logs

    path = tmp_path / "day.jsonl"
    _write_message(path, "m1", "We ship on Friday.", date(2024, 3, 5))
    with path.open("a", encoding="utf-8") as out:
        out.write('{"conversation_id": "c1", "role": "user"}\n')  # no subject, id, content or time
    ingest_logs(settings, [path], namespace=namespace, progress=False)
    run_id = runs.start_run(engine, "weekly", {}, namespace)
    runs.finish_run(engine, run_id, "completed_with_errors", {"units_failed": 2}, "acme/sha256:0123: timeout")

    report = status.render(status.collect(settings, namespace))

    lines = report.splitlines()
    weekly = next(line.split() for line in lines if line.strip().startswith("weekly"))
    ingest = next(line.split() for line in lines if line.strip().startswith("ingest"))
    assert (weekly[1], ingest[1]) == ("completed_with_errors", "completed")
    assert "(1 runs, 2 failed unit(s))" in report and "error: acme/sha256:0123: timeout" in report
    assert f"{namespace:20} 1 of 2 records (50.0%)" in report  # the quarantine rate of this namespace
    assert any(line.split()[:2] == ["ingest", namespace] for line in lines)  # its file watermark


def test_a_dry_runs_summary_says_so_with_the_ranges_real_size() -> None:
    from models.params import BackfillPlan, RunCounts, RunSummary
    from strataflow.pipeline.run_summary import summary_markdown

    plan = BackfillPlan(
        start=date(2024, 3, 1), end=date(2024, 4, 9), reprocess=True, force=False,
        weeks=[date(2024, 3, 4) + timedelta(weeks=n) for n in range(5)],
    )  # fmt: skip
    summary = RunSummary(
        flow="backfill", run_id="r", status="completed", counts=RunCounts(), days=1, plan=plan
    )
    text = summary_markdown(summary)
    assert "dry run" in text and "40 day(s) 2024-03-01..2024-04-09, 5 complete week(s)" in text
    assert "Backfill: 1 day(s)" not in text
