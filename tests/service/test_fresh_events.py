"""Memory within two minutes: an accepted online write sends `strataflow.messages.received` to the Prefect API
(strataflow/ops/freshness.py) after its response, and a Prefect API that is missing or down never fails it.
The Prefect API here is a recorder on 127.0.0.1 (the trigger and the flow it runs: tests/flows/test_fresh.py
and the realmodel check, part C)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from strataflow.config import Settings
from strataflow.ops import freshness
from strataflow.pipeline.runs import scope_ref
from tests.fixtures.service import Tenant


@pytest.fixture
def events_api(settings: Settings) -> Iterator[list[Any]]:
    """A recorder of POST /api/events/ bodies, recorded as the serve address of the test home."""
    received: list[Any] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            received.append((self.path, json.loads(self.rfile.read(int(self.headers["Content-Length"])))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{httpd.server_address[1]}/api"
    freshness.record_api_url(settings, url)
    try:
        yield received
    finally:
        freshness.forget_api_url(settings, url)
        httpd.shutdown()
        httpd.server_close()


def _wait_for(received: list[Any], count: int) -> None:
    deadline = time.monotonic() + 10
    while len(received) < count and time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_posted_message_sends_one_event_naming_its_namespace_and_scope_by_hash(
    api_url: str, tenants: dict[str, Tenant], subject: str, events_api: list[Any]
) -> None:
    alpha = tenants["alpha"].client(api_url)
    message = {
        "conversation_id": "c1", "subject_id": subject, "source_message_id": uuid.uuid4().hex, "role": "user",
        "content": "I work as a veterinarian in Porto.", "created_at": datetime.now(UTC).isoformat(),
    }  # fmt: skip
    assert alpha.post("/v1/messages", json=message).status_code == 200
    _wait_for(events_api, 1)
    again = alpha.post("/v1/messages", json=message)  # unchanged: nothing new to extract, no event
    assert again.status_code == 200 and again.json()["unchanged"] == 1
    time.sleep(0.5)

    [(path, [event])] = events_api
    namespace = tenants["alpha"].namespace
    assert path == "/api/events" and event["event"] == "strataflow.messages.received"
    assert event["resource"] == {
        "prefect.resource.id": f"strataflow.namespace.{namespace}",
        "strataflow.namespace": namespace,
    }
    assert event["payload"] == {"messages": 1, "scopes": [scope_ref(namespace, subject)]}
    assert subject not in json.dumps(event), "subjects travel by hash only"


def test_a_prefect_api_that_is_down_costs_the_write_nothing(settings: Settings) -> None:
    freshness.record_api_url(settings, "http://127.0.0.1:9/api")  # nothing listens on port 9
    try:
        started = time.monotonic()
        assert freshness.emit_messages_received(settings, "ns", ["s"], 1) is False
        assert time.monotonic() - started < freshness.SEND_TIMEOUT_S + 1
    finally:
        freshness.forget_api_url(settings, "http://127.0.0.1:9/api")
    assert freshness.emit_messages_received(settings, "ns", ["s"], 1) is False, (
        "no serve recorded: nothing sent"
    )
