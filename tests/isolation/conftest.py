"""An OpenAI-compatible server on 127.0.0.1 for the isolation tests (the pattern of tests/extract/conftest.py)
that also records each request's Authorization header, so a test can prove which key was sent."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from strataflow.prompt_blocks import parse_blocks, parse_json_lines


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


class RecordingLLMServer:
    """Answers /v1/chat/completions: first from `script` [(status, body)] in order, then echo_model."""

    def __init__(self) -> None:
        self.script: list[tuple[int, str]] = []
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                server.authorizations.append(self.headers.get("Authorization", ""))
                status, content = server.script.pop(0) if server.script else (200, echo_model(body))
                if status == 200:
                    payload: dict[str, Any] = {
                        "id": f"chatcmpl-{len(server.requests)}", "object": "chat.completion", "created": 0,
                        "model": body["model"],
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": content}}],
                        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
                    }  # fmt: skip
                else:
                    payload = {"error": {"message": content, "type": "server_error"}}
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

    def prompts(self) -> list[str]:
        return ["\n".join(m["content"] for m in request["messages"]) for request in self.requests]


@pytest.fixture
def llm_server() -> Iterator[RecordingLLMServer]:
    server = RecordingLLMServer()
    server.thread.start()
    yield server
    server.httpd.shutdown()
    server.httpd.server_close()
