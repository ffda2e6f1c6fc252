"""The failure policy of the LLM stages under a real Prefect API: a weekly run whose model is unreachable ends
Failed (in Prefect, in pipeline_runs, in `strataflow status`, with the errors in the run's log); a run with
one bad scope-week ends completed_with_errors. Errors name scopes by hash, never by subject id."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text
from typer.testing import CliRunner

from strataflow.cli import app
from strataflow.config import Settings
from strataflow.pipeline.ingest import ingest_logs
from strataflow.pipeline.runs import scope_ref

SUBJECTS = ("client-zh", "team-en")  # the subjects of write_daily_logs
SELECT_RUN = text(
    """
    select status, error, counts, prefect_flow_run_id from pipeline_runs
    where flow = 'weekly' and namespace = :ns order by started_at desc limit 1
    """
)
COUNT_REPORTS = text("select count(*) from weekly_reports where namespace = :ns")


def _ingest(settings: Settings, tmp_path: Path, write_daily_logs: Any, namespace: str) -> None:
    write_daily_logs(tmp_path / "logs", tag=namespace)
    assert ingest_logs(settings, [tmp_path / "logs"], namespace=namespace, progress=False).inserted == 9


def _weekly_run(engine: Engine, namespace: str) -> Any:
    with engine.connect() as conn:
        return conn.execute(SELECT_RUN, {"ns": namespace}).mappings().one()


def _flow_run(flow_run_id: uuid.UUID) -> tuple[str, list[str]]:
    """(state name, log messages) of a Prefect flow run, read back from the API."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import LogFilter, LogFilterFlowRunId
    from prefect.logging.handlers import APILogWorker

    APILogWorker.drain_all(timeout=10)  # the run's log lines are sent in batches: send what is left
    with get_client(sync_client=True) as client:
        state = client.read_flow_run(flow_run_id).state
        logs = client.read_logs(log_filter=LogFilter(flow_run_id=LogFilterFlowRunId(any_=[flow_run_id])))
    assert state is not None
    return state.name, [log.message for log in logs]


def _point_rollup_at(monkeypatch: pytest.MonkeyPatch, api_base: str) -> None:
    """What the flow's load_settings reads: the rollup on an OpenAI-compatible model at api_base."""
    monkeypatch.setenv("STRATAFLOW_ROLLUP_MODEL", "openai/test-model")
    monkeypatch.setenv("STRATAFLOW_LLM_API_BASE", api_base)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-for-the-scripted-server")
    monkeypatch.setenv("STRATAFLOW_LLM_MAX_RETRIES", "0")
    monkeypatch.setenv("STRATAFLOW_LLM_TIMEOUT_S", "5")


def test_a_weekly_run_whose_model_is_unreachable_fails_everywhere_it_is_reported(
    prefect_harness: None,
    settings: Settings,
    engine: Engine,
    namespace: str,
    tmp_path: Path,
    write_daily_logs: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _ingest(settings, tmp_path, write_daily_logs, namespace)
    _point_rollup_at(monkeypatch, "http://127.0.0.1:9/v1")  # nothing listens on port 9

    ran = CliRunner().invoke(app, ["run", "weekly", "--namespace", namespace])
    shown = CliRunner().invoke(app, ["status", "--namespace", namespace])

    assert ran.exit_code == 1, ran.output
    assert "the weekly run ended Failed" in ran.output
    run = _weekly_run(engine, namespace)
    assert run["status"] == "failed"
    assert "rollup: all 4 unit(s) failed" in run["error"]
    for subject in SUBJECTS:
        assert scope_ref(namespace, subject) in run["error"] and subject not in run["error"]
    state, logs = _flow_run(run["prefect_flow_run_id"])
    assert state == "Failed"
    failures = [line for line in logs if line.startswith("rollup of")]
    assert len(failures) == 4 and all("sha256:" in line and "kept failing" in line for line in failures)
    assert not any(subject in line for line in logs for subject in SUBJECTS)
    assert shown.exit_code == 0, shown.output
    weekly_line = next(line for line in shown.output.splitlines() if line.strip().startswith("weekly"))
    assert weekly_line.split()[1] == "failed"
    assert "rollup: all 4 unit(s) failed" in shown.output
    with engine.connect() as conn:
        assert conn.execute(COUNT_REPORTS, {"ns": namespace}).scalar_one() == 0


def test_a_weekly_run_with_one_bad_week_writes_the_others_and_ends_completed_with_errors(
    prefect_harness: None,
    settings: Settings,
    engine: Engine,
    namespace: str,
    tmp_path: Path,
    write_daily_logs: Any,
    monkeypatch: pytest.MonkeyPatch,
    scripted_llm_server: Any,
) -> None:
    from flows.weekly import weekly
    from models.params import WeeklyParams

    _ingest(settings, tmp_path, write_daily_logs, namespace)
    _point_rollup_at(monkeypatch, scripted_llm_server.url)
    scripted_llm_server.script = [(200, "no json here"), (200, "still no json")]  # the answer and its repair
    scripted_llm_server.fallback = lambda body: json.dumps({"summary": "A quiet week.", "key_events": []})

    state = weekly(WeeklyParams(namespace=namespace), return_state=True)

    assert state.is_completed(), state.message
    summary = state.result()
    assert (summary.status, summary.counts.units_failed, summary.counts.weekly_reports_written) == (
        "completed_with_errors",
        1,
        3,
    )
    assert len(summary.errors) == 1 and "invalid output twice" in summary.errors[0]
    run = _weekly_run(engine, namespace)
    assert (run["status"], run["counts"]["units_failed"], run["error"]) == (
        "completed_with_errors",
        1,
        summary.errors[0],
    )
    assert not any(subject in run["error"] for subject in SUBJECTS)
    _, logs = _flow_run(run["prefect_flow_run_id"])
    assert any(line.startswith("rollup of") and "invalid output twice" in line for line in logs)
    with engine.connect() as conn:
        assert conn.execute(COUNT_REPORTS, {"ns": namespace}).scalar_one() == 3
