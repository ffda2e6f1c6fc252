"""An OpenAI-compatible server on 127.0.0.1 for the isolation tests (the pattern of tests/extract/conftest.py)
that also records each request's Authorization header, so a test can prove which key was sent."""

from __future__ import annotations

import json
from typing import Any

import pytest

from strataflow.llm.prompt_blocks import parse_blocks, parse_json_lines


def echo_model(body: dict[str, Any]) -> str:
    """A stand-in model: no items for extraction, the message texts joined for a summary."""
    prompt = "\n".join(m["content"] for m in body["messages"])
    blocks = parse_blocks(prompt)
    if blocks.get("task") == "extract":
        return '{"items": []}'
    records = parse_json_lines(blocks.get("messages", ""))
    return json.dumps(
        {
            "summary": " / ".join(r["text"] for r in records)[:500] or "nothing",
            "source_message_ids": [r["id"] for r in records],
        }
    )


@pytest.fixture
def llm_server(scripted_llm_server: Any) -> Any:
    """The scripted OpenAI-compatible server, answering with echo_model once its script is spent."""
    scripted_llm_server.fallback = echo_model
    return scripted_llm_server
