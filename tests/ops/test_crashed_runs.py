"""Runs whose process is killed (kill -9) are marked crashed where people look: a run over every namespace
killed after its ingest counts as crashed for each namespace it wrote to, in that namespace's analysts'
pipeline_health and pipeline_run_namespaces; a flow run killed mid-way is Crashed in Prefect as well as in
pipeline_runs once the next run of its flow starts, or once `strataflow serve`'s reaper looks."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

from sqlalchemy import Engine, text

from strataflow.db import roles
from strataflow.pipeline import runs

# A global run (no namespace) that ingests a file naming two namespaces, says its run id, and waits to be
# killed: the trial's crash_nightly.sh, without Prefect.
INGEST_THEN_WAIT = """
import sys, time
from strataflow.config import load_settings
from strataflow.db.engine import engine_for
from strataflow.pipeline import runs
from strataflow.pipeline.ingest import ingest_logs

settings = load_settings()
run_id = runs.start_run(engine_for(settings), sys.argv[1], {}, None)
ingest_logs(settings, [sys.argv[2]], run_id=run_id, progress=False)
print(run_id, flush=True)
time.sleep(600)
"""
# A Prefect flow run (against the test's Prefect API) that opens its pipeline run, says both ids, and waits.
FLOW_THEN_WAIT = """
import sys, time
from prefect import flow
from prefect.runtime import flow_run
from strataflow.config import load_settings
from strataflow.db.engine import engine_for
from strataflow.pipeline import runs

@flow(name=sys.argv[1])
def doomed():
    engine = engine_for(load_settings())
    run_id = runs.start_run(engine, sys.argv[1], {}, None, prefect_flow_run_id=flow_run.id)
    print(run_id, flow_run.id, flush=True)
    time.sleep(600)

doomed()
"""


def _killed_after(script: str, *args: str, env: dict[str, str] | None = None) -> list[str]:
    """Run script in a process of its own until it prints a line, kill it with SIGKILL; the line's words."""
    process = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=60)
    assert line, "the process ended before it said its run"
    return line.split()


def test_a_global_run_killed_after_its_ingest_counts_as_crashed_in_each_namespace_it_wrote_to(
    engine: Engine, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:8]
    a, b, analyst, flow = f"ca_{suffix}", f"cb_{suffix}", f"can_{suffix}", f"nightly_{suffix}"
    with engine.begin() as conn:
        roles.create_role(conn, analyst, "analyst", with_password=False)
        roles.grant(conn, analyst, a)
    log = tmp_path / "night.jsonl"
    log.write_text(
        "".join(
            json.dumps(
                {
                    "conversation_id": f"c-{ns}",
                    "subject_id": f"{ns}_user",
                    "namespace": ns,
                    "source_message_id": f"{ns}-{i}",
                    "role": "user",
                    "content": f"I moved to Porto {i}.",
                    "created_at": "2026-11-02T10:00:00Z",
                }
            )
            + "\n"
            for ns in (a, b)
            for i in range(3)
        ),  # fmt: skip
        encoding="utf-8",
    )
    (killed,) = _killed_after(INGEST_THEN_WAIT, flow, str(log))
    runs.finish_run(engine, runs.start_run(engine, flow), runs.COMPLETED)  # the next run marks it crashed

    with engine.connect() as conn, conn.begin():
        status = conn.execute(text("select status from pipeline_runs where run_id = :r"), {"r": killed})
        assert status.scalar_one() == "crashed"
        owner = conn.execute(  # ('*': the file's ingest watermark, which names no one namespace)
            text(
                "select namespace, status from pipeline_run_namespaces where run_id = :r and namespace <> '*'"
            ),
            {"r": killed},
        )
        assert sorted(owner.all()) == [(a, "crashed"), (b, "crashed")]
        roles.as_role(conn, analyst)
        health = conn.execute(
            text(
                "select namespace, count_crashed from pipeline_health where flow = :f and count_crashed > 0"
            ),
            {"f": flow},
        )
        assert health.all() == [(a, 1)]  # its own namespace's part, nothing of b's


def test_a_flow_run_killed_mid_way_is_crashed_in_prefect_when_the_next_run_starts(
    prefect_harness: None, engine: Engine
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL

    flow = f"doomed_{uuid.uuid4().hex[:8]}"
    run_id, flow_run_id = _killed_after(
        FLOW_THEN_WAIT, flow, env={"PREFECT_API_URL": PREFECT_API_URL.value()}
    )
    with get_client(sync_client=True) as client:
        assert client.read_flow_run(uuid.UUID(flow_run_id)).state.is_running()  # what the UI showed for good

    assert runs.mark_crashed(engine, flow) == [uuid.UUID(run_id)]  # what start_run does first

    with get_client(sync_client=True) as client:
        state = client.read_flow_run(uuid.UUID(flow_run_id)).state
    assert state.is_crashed() and "died" in (state.message or "")
    with engine.connect() as conn:
        status = conn.execute(text("select status from pipeline_runs where run_id = :r"), {"r": run_id})
        assert status.scalar_one() == "crashed"


def test_the_reaper_marks_every_flows_dead_runs_and_leaves_live_ones(engine: Engine) -> None:
    dead_pid = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout.strip()  # fmt: skip
    host, pid, started = runs.this_process()
    insert = text(
        "insert into pipeline_runs (run_id, flow, host, pid, process_started_at) values (:r, :f, :h, :p, :s)"
    )
    dead, alive = uuid.uuid4(), uuid.uuid4()
    with engine.begin() as conn:  # a backfill nobody runs again, and a run of this very process
        conn.execute(
            insert, {"r": dead, "f": f"backfill_{dead.hex[:6]}", "h": host, "p": int(dead_pid), "s": started}
        )
        conn.execute(insert, {"r": alive, "f": f"weekly_{alive.hex[:6]}", "h": host, "p": pid, "s": started})
    assert dead in runs.reap_crashed(engine)
    with engine.connect() as conn:
        states = dict(
            conn.execute(
                text("select run_id, status from pipeline_runs where run_id in (:d, :a)"),
                {"d": dead, "a": alive},
            ).all()
        )
    assert states == {dead: "crashed", alive: "running"}
    runs.finish_run(engine, alive, runs.COMPLETED)
