"""bench.ingest writes in weeks where L1 holds nobody else's rows, so every round's ingest gets fresh
partitions, as its baseline gets a fresh table (bench/ingest.py, free_window)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine, text

from bench.ingest import SELECT_PARTITIONS, bench_weeks, free_window
from strataflow.config import Settings
from strataflow.pipeline.ingest import ingest_logs


def test_the_bench_window_moves_back_past_weeks_that_hold_other_rows(
    settings: Settings, engine: Engine, namespace: str, tmp_path: Path
) -> None:
    # A team's message in the week the bench would write in first (41 days back, as the sample's are).
    said_at = datetime.now(UTC) - timedelta(days=39)
    record = {"conversation_id": "c1", "subject_id": "u1", "source_message_id": "m1", "role": "user",
              "content": "a message of the team's own", "created_at": said_at.isoformat()}  # fmt: skip
    path = tmp_path / "team.jsonl"
    path.write_text(json.dumps(record) + "\n")
    assert ingest_logs(settings, [path], namespace=namespace, progress=False).inserted == 1

    first, last = free_window(engine, 20_000)

    assert first < datetime.now(UTC) - timedelta(days=41)  # moved back from the default window
    names = [f"conversation_messages_w{week:%G_%V}" for week in bench_weeks(first, last)]
    with engine.connect() as conn:
        assert conn.execute(SELECT_PARTITIONS, {"names": names}).all() == []
        kept = conn.execute(
            text("select count(*) from conversation_messages where namespace = :ns"), {"ns": namespace}
        )
        assert kept.scalar_one() == 1  # the team's row and its partition stay
