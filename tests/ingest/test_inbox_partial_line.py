"""A JSONL file still being written (issue 36 item 6): its last line, without a newline and not JSON yet, is
left for the next run, never quarantined; once the writer finishes the line, the next ingest reads it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import Engine, text

from strataflow.config import Settings
from strataflow.ingest.readers import read_chunks


def _line(number: int) -> bytes:
    at = (datetime.now(UTC) - timedelta(days=1, minutes=-number)).isoformat()
    record = {"conversation_id": "c1", "subject_id": "u1", "source_message_id": f"m{number}", "role": "user",
              "content": f"message {number}", "created_at": at}  # fmt: skip
    return json.dumps(record).encode() + b"\n"


def test_a_half_written_last_line_is_read_by_the_next_run_not_quarantined(
    settings: Settings, engine: Engine, namespace: str, tmp_path: Path
) -> None:
    from strataflow.pipeline.ingest import ingest_logs

    inbox = tmp_path / "inbox"
    inbox.mkdir()
    path = inbox / "today.jsonl"
    second = _line(2)
    path.write_bytes(_line(1) + second[:25])  # the writer is in the middle of line 2
    items = [item for chunk in read_chunks(path, "jsonl", 100, UTC) for item in chunk]
    assert [item[0] for item in items] == [1]

    first = ingest_logs(settings, [inbox], namespace=namespace, progress=False)
    assert (first.inserted, first.quarantined) == (1, 0)
    with path.open("ab") as handle:
        handle.write(second[25:])
    again = ingest_logs(settings, [inbox], namespace=namespace, progress=False)
    assert (again.inserted, again.quarantined) == (1, 0)
    with engine.connect() as conn:
        stored = conn.execute(
            text("select count(*) from conversation_messages where namespace = :ns"), {"ns": namespace}
        ).scalar_one()
        quarantined = conn.execute(
            text("select count(*) from quarantine where namespace = :ns"), {"ns": namespace}
        ).scalar_one()
    assert (stored, quarantined) == (2, 0)


def test_a_bad_line_that_is_complete_is_still_quarantined(tmp_path: Path) -> None:
    path = tmp_path / "done.jsonl"
    path.write_bytes(_line(1) + b'{"content": "broken\n' + _line(3)[:-1])  # last line complete, no newline
    items = [item for chunk in read_chunks(path, "jsonl", 100, UTC) for item in chunk]
    assert [item[0] for item in items] == [1, 2, 3]
    assert items[1][2].reason == "malformed_json" and isinstance(items[2][2], dict)
