"""Fixtures for the extraction tests: an OpenAI-compatible server on 127.0.0.1 with scripted replies, and a
helper that writes L1 rows the way ingest does (through tasks.ingest.ingest_logs)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

DUMMY_KEY = "sk-test-dummy-key-1234567890"


@pytest.fixture
def llm_server(monkeypatch: pytest.MonkeyPatch, scripted_llm_server: Any) -> Any:
    """The session's scripted OpenAI-compatible server, with a dummy key in the environment."""
    monkeypatch.setenv("OPENAI_API_KEY", DUMMY_KEY)
    return scripted_llm_server


@pytest.fixture
def write_logs(tmp_path: Path) -> Callable[..., Path]:
    """write_logs(name, records) -> a JSONL file in a temp dir."""

    def write(name: str, records: list[dict[str, Any]]) -> Path:
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
        return path

    return write


def make_message(
    subject: str, mid: str, content: str, created_at: str, role: str = "user", conv: str = "c1"
) -> dict:
    return {
        "conversation_id": conv,
        "subject_id": subject,
        "source_message_id": mid,
        "role": role,
        "content": content,
        "created_at": created_at,
    }


@pytest.fixture
def message() -> Callable[..., dict]:
    """message(subject, source_message_id, content, created_at, role="user", conv="c1") -> a record."""
    return make_message
