"""Fixtures for the seed protocol tests: load messages the way a user does (ingest a JSONL log, then run the
extraction with the default offline/rules model), each test in a namespace of its own."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from strataflow.config import Settings

Load = Callable[..., Any]


@pytest.fixture
def load(settings: Settings, namespace: str, tmp_path: Path) -> Load:
    """load({subject: [user message, ...]}, extract=True) ingests the messages into `namespace` and extracts
    them. Messages are two minutes apart, each followed by an assistant reply; every call continues the same
    clock (starting six hours ago), so a later call states newer facts."""
    from tasks.extract import extract_new
    from tasks.ingest import ingest_logs

    calls = [0]
    clock = [datetime.now(UTC) - timedelta(hours=6)]

    def run(dialogs: dict[str, list[str]], extract: bool = True) -> Any:
        calls[0] += 1
        records = []
        for subject, messages in dialogs.items():
            for index, content in enumerate(messages):
                clock[0] += timedelta(minutes=2)
                at = clock[0]
                for role, body, minutes in (("user", content, 0), ("assistant", "好的 / noted.", 1)):
                    records.append(
                        {"conversation_id": f"{subject}-c", "subject_id": subject, "role": role,
                         "source_message_id": f"{subject}-{calls[0]}-{index}-{role}", "content": body,
                         "created_at": (at + timedelta(minutes=minutes)).isoformat()}
                    )  # fmt: skip
        path = tmp_path / f"log_{calls[0]}.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
        ingest_logs(settings, [path], namespace=namespace, progress=False)
        return extract_new(settings, namespace=namespace, progress=False) if extract else None

    return run
