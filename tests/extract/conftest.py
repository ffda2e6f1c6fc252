"""Fixtures for the extraction tests: an OpenAI-compatible server on 127.0.0.1 with scripted replies, and a
helper that writes L1 rows the way ingest does (through tasks.ingest.ingest_logs)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

DUMMY_KEY = "sk-test-dummy-key-1234567890"

Reply = tuple[int, str]  # (HTTP status, assistant content or error body)


class ScriptedLLMServer:
    """Answers /v1/chat/completions: first from the script (status, content) in order, then fallback()."""

    def __init__(self) -> None:
        self.script: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.api_key = DUMMY_KEY
        self.fallback: Callable[[dict[str, Any]], str] = lambda body: '{"items": []}'
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                status, content = server.script.pop(0) if server.script else (200, server.fallback(body))
                if status == 200:
                    payload = {
                        "id": f"chatcmpl-{len(server.requests)}",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": content},
                            }
                        ],
                        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
                    }
                else:
                    payload = {
                        "error": {"message": content, "type": "rate_limit" if status == 429 else "server"}
                    }
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def prompt_of(self, index: int) -> str:
        return "\n".join(m["content"] for m in self.requests[index]["messages"])


@pytest.fixture
def llm_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[ScriptedLLMServer]:
    monkeypatch.setenv("OPENAI_API_KEY", DUMMY_KEY)
    server = ScriptedLLMServer()
    server.thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()


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
