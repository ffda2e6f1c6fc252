"""Runs and files that clean up, and no cross-tenant oracle or starvation (issue 28 items 7 and 9): a run
whose process died is marked crashed by the next run of its flow; a bad record is quarantined once however
often it is read; the home, reports and error texts keep what they hold private; the LLM answer cache is
keyed by namespace; one namespace that spends its share of the run's budget stops only its own scopes."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError

from models.llm import ExtractionOutput
from models.results import LLMStageResult
from strataflow.config import Settings
from strataflow.llm.gateway import LLMGateway, NamespaceBudgetExhausted
from strataflow.pipeline import runs
from strataflow.pipeline.stage_loop import run_units, scope_name


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_run_whose_process_died_is_marked_crashed_by_the_next_run(engine: Engine) -> None:
    flow = f"tenancy_flow_{uuid.uuid4().hex[:6]}"
    host, pid, started = runs.this_process()
    dead, alive, elsewhere = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    insert = text(
        "insert into pipeline_runs (run_id, flow, host, pid, process_started_at) values (:r, :f, :h, :p, :s)"
    )
    with engine.begin() as conn:
        conn.execute(insert, {"r": dead, "f": flow, "h": host, "p": _dead_pid(), "s": started})
        conn.execute(insert, {"r": alive, "f": flow, "h": host, "p": pid, "s": started})
        conn.execute(insert, {"r": elsewhere, "f": flow, "h": "another-host", "p": 1, "s": started})
    run_id = runs.start_run(engine, flow)
    with engine.connect() as conn:
        states = dict(
            conn.execute(text("select run_id, status from pipeline_runs where flow = :f"), {"f": flow}).all()
        )
        error = conn.execute(text("select error from pipeline_runs where run_id = :r"), {"r": dead}).scalar()
    assert states == {dead: "crashed", alive: "running", elsewhere: "running", run_id: "running"}
    assert "ended without closing the run" in error
    runs.finish_run(engine, run_id, runs.COMPLETED)


def test_a_bad_record_read_again_is_quarantined_once(engine: Engine, namespace: str) -> None:
    from strataflow.ingest.enrich import PreparedChunk
    from strataflow.ingest.staging import write_chunk

    bad = {"namespace": namespace, "subject_id": "u1", "source": "daily.jsonl", "position": "7",
           "field": "role", "reason": "unknown_role", "error": "daily.jsonl record 7: bad role",
           "raw_record": '{"role": "x"}'}  # fmt: skip
    for _ in range(2):  # an ingest killed after this chunk, then run again
        with engine.begin() as conn:
            write_chunk(conn, PreparedChunk(quarantined=[bad]), 1, uuid.uuid4(), 30)
    with engine.connect() as conn:
        count = conn.execute(
            text("select count(*) from quarantine where namespace = :n"), {"n": namespace}
        ).scalar()
    assert count == 1


def test_error_texts_carry_no_sql_parameters(engine: Engine) -> None:
    secret = f"my passport is E{uuid.uuid4().int % 10**7:07d}"
    with engine.connect() as conn, pytest.raises(DBAPIError) as failed:
        conn.execute(text("select 1 / 0 where cast(:value as text) is not null"), {"value": secret})
    assert secret not in str(failed.value)


def test_the_home_and_reports_are_private(
    strataflow_home: Path, engine: Engine, settings: Settings, access_data: Any, tmp_path: Path
) -> None:
    from strataflow.ops.report import write_report

    expected = 0o711 if os.geteuid() == 0 else 0o700  # root: the server's own user traverses the home
    assert strataflow_home.stat().st_mode & 0o777 == expected
    assert all(p.stat().st_mode & 0o077 == 0 for p in (strataflow_home / "secrets").rglob("*"))
    out = tmp_path / "report.html"
    with engine.connect() as conn:
        write_report(conn, settings, out, namespace=access_data.namespace)
    page = out.read_text(encoding="utf-8")
    assert out.stat().st_mode & 0o777 == 0o600
    assert "subject (sha256)" in page and "u_zh" not in page and "u_en" not in page


def test_commands_create_private_files(tmp_path: Path, strataflow_home: Path) -> None:
    out = tmp_path / "cli-report.html"
    made = subprocess.run(
        [sys.executable, "-m", "strataflow.cli", "report", "--out", str(out)],
        env={**os.environ, "STRATAFLOW_HOME": str(strataflow_home)}, capture_output=True, text=True,
        timeout=300, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    assert out.stat().st_mode & 0o777 == 0o600


class Unit(NamedTuple):
    namespace: str
    subject_id: str


def _gateway(settings: Settings, url: str, **overrides: object) -> LLMGateway:
    return LLMGateway(
        settings.model_copy(update={"extract_model": "openai/test-model", "llm_api_base": url, **overrides}),
        uuid.uuid4(),
    )


def test_the_answer_cache_is_keyed_by_namespace(settings: Settings, llm_server: Any) -> None:
    gateway = _gateway(settings, llm_server.url)
    prompt = [{"role": "user", "content": f"<task>\nextract\n</task> same text {uuid.uuid4()}"}]
    for namespace in ("ns_a", "ns_a", "ns_b"):
        gateway.complete("extract", "cache-ns", prompt, ExtractionOutput, namespace=namespace, subject_id="s")
    assert (gateway.requests_sent, gateway.cache_hits) == (2, 1)  # ns_b did not get ns_a's answer


def test_one_namespace_spending_its_share_stops_only_its_scopes(settings: Settings, llm_server: Any) -> None:
    gateway = _gateway(settings, llm_server.url, llm_budget_tokens=1000)  # 120 tokens a request
    units = [Unit("ns_a", f"a{i}") for i in range(8)] + [Unit("ns_b", f"b{i}") for i in range(2)]

    def work(unit: Unit) -> None:
        prompt = [{"role": "user", "content": f"<task>\nextract\n</task> {unit} {uuid.uuid4()}"}]
        gateway.complete("extract", "fair", prompt, ExtractionOutput, namespace=unit.namespace)

    result = run_units("extract", gateway, units, work, LLMStageResult(), scope_name)
    stopped = [error.split(": ", 1)[0] for error in result.errors]
    assert gateway.namespace_budget("ns_a") == 500 and len(stopped) == 3  # a0-a4 ran (600 tokens), a5-a7 not
    assert stopped == [runs.scope_ref("ns_a", f"a{i}") for i in (5, 6, 7)]
    assert all("share" in error for error in result.errors)
    assert gateway.requests_sent == 7  # a0-a4, and ns_b's two
    assert result.units_failed == 0 and not result.budget_stopped
    assert runs.run_status([result]) == runs.COMPLETED_WITH_ERRORS


def test_a_namespace_share_can_be_configured(settings: Settings, llm_server: Any) -> None:
    gateway = _gateway(settings, llm_server.url, llm_budget_namespace_tokens={"ns_small": 100})
    prompt = [{"role": "user", "content": f"<task>\nextract\n</task> {uuid.uuid4()}"}]
    gateway.complete("extract", "share", prompt, ExtractionOutput, namespace="ns_small")
    with pytest.raises(NamespaceBudgetExhausted, match="ns_small"):
        gateway.complete("extract", "share", [{**prompt[0], "content": "other"}], ExtractionOutput,
                         namespace="ns_small")  # fmt: skip
    gateway.complete(
        "extract", "share", [{**prompt[0], "content": "big"}], ExtractionOutput, namespace="ns_big"
    )
