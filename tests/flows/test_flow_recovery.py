"""A run killed with SIGKILL mid-way, then rerun through a flow, leaves no duplicate and no gap."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine, text

from models.params import BackfillParams, Stage

ROWS = 12_000
COUNT_KEYS = text("select count(*) from message_keys where namespace = :ns")
SELECT_IDENTITY = text(
    """
    select count(*) as count_rows, count(distinct k.source_message_id) as count_ids,
           (select count(*) from conversation_messages m where m.namespace = :ns) as count_messages
    from message_keys k where k.namespace = :ns
    """
)
SELECT_IDS = text("select source_message_id from message_keys where namespace = :ns")


def _write_big_log(path: Path) -> set[str]:
    start = datetime.now(UTC) - timedelta(days=10)
    ids = set()
    with path.open("w", encoding="utf-8") as out:
        for number in range(ROWS):
            source_message_id = f"m{number:06d}"
            ids.add(source_message_id)
            record = {
                "conversation_id": f"c{number % 40}",
                "subject_id": f"s{number % 7}",
                "source_message_id": source_message_id,
                "role": "user" if number % 2 else "assistant",
                "content": f"Status update {number}: the export job for batch {number % 97} is running.",
                "created_at": (start + timedelta(seconds=30 * number)).isoformat(),
            }
            out.write(json.dumps(record) + "\n")
    return ids


def _kill_mid_ingest(path: Path, namespace: str, engine: Engine) -> int:
    """Start `strataflow ingest logs` in small chunks; SIGKILL its process group once rows have landed."""
    env = {**os.environ, "STRATAFLOW_INGEST_CHUNK_ROWS": "500"}
    command = [sys.executable, "-m", "strataflow.cli", "ingest", "logs", str(path), "--namespace", namespace]
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    landed = 0
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and process.poll() is None:
        with engine.connect() as conn:
            landed = conn.execute(COUNT_KEYS, {"ns": namespace}).scalar_one()
        if landed > 0:
            break
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    with engine.connect() as conn:  # what the killed run committed
        return conn.execute(COUNT_KEYS, {"ns": namespace}).scalar_one()


def test_an_ingest_killed_mid_file_and_rerun_by_a_backfill_has_every_row_exactly_once(
    prefect_harness: None, engine: Engine, namespace: str, tmp_path: Path
) -> None:
    from flows.backfill import backfill

    expected = _write_big_log(tmp_path / "export.jsonl")
    landed = _kill_mid_ingest(tmp_path / "export.jsonl", namespace, engine)
    assert 0 < landed < ROWS  # killed mid-file, with part of it committed

    today = datetime.now(UTC).date()
    params = BackfillParams(
        start=today - timedelta(days=11),
        end=today,
        stages=[Stage.ingest],
        paths=[str(tmp_path)],
        namespace=namespace,
    )
    state = backfill(params, return_state=True)
    assert state.is_completed(), state.message
    summary = state.result()

    with engine.connect() as conn:
        identity = conn.execute(SELECT_IDENTITY, {"ns": namespace}).mappings().one()
        ids = {row[0] for row in conn.execute(SELECT_IDS, {"ns": namespace})}
    assert dict(identity) == {"count_rows": ROWS, "count_ids": ROWS, "count_messages": ROWS}
    assert ids == expected
    assert summary.counts.rows_inserted == ROWS - landed
