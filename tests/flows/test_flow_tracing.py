"""One OpenTelemetry trace per flow run (flows/tracing.py): `strataflow run incremental` with an OTLP endpoint
exports the flow run's span as the one root, its task runs as children, and the stages' own spans
(strataflow.extract, ...) below them, all in one trace."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from sqlalchemy import Engine


class Receiver(http.server.BaseHTTPRequestHandler):
    bodies: list[bytes] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        Receiver.bodies.append(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return None


def test_a_flow_run_is_one_trace_with_its_tasks_and_stages_as_children(
    prefect_harness: None, engine: Engine, namespace: str, tmp_path: Path
) -> None:
    from prefect.settings import PREFECT_API_URL

    log = tmp_path / "today.jsonl"
    log.write_text(
        "".join(
            json.dumps(
                {
                    "conversation_id": "c1",
                    "subject_id": "u1",
                    "source_message_id": f"m{i}",
                    "role": "user",
                    "content": text,
                    "created_at": "2026-11-30T10:0{i}:00Z",
                }
            )
            + "\n"
            for i, text in enumerate(["I work as a nurse in Porto.", "I prefer short answers."])
        ),  # fmt: skip
        encoding="utf-8",
    )
    server = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {
        **os.environ,
        "PREFECT_API_URL": str(PREFECT_API_URL.value()),
        "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}",
        "OTEL_SERVICE_NAME": "sf-flow-test",
    }
    try:
        done = subprocess.run(
            [sys.executable, "-c", "from strataflow.cli import app; app()", "run", "incremental",
             "--path", str(log), "--namespace", namespace],
            env=env, capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    finally:
        server.shutdown()
    assert done.returncode == 0, done.stderr[-3000:]

    spans = []
    for body in Receiver.bodies:
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        spans += [s for r in request.resource_spans for ss in r.scope_spans for s in ss.spans]
    names = [s.name for s in spans]
    assert "strataflow.extract" in names, names
    assert len({s.trace_id for s in spans}) == 1, "one trace for the whole run"
    (root,) = [s for s in spans if not s.parent_span_id]
    attributes = {a.key: a.value.string_value for a in root.attributes}
    assert attributes["prefect.run.type"] == "flow"
    by_id = {s.span_id: s for s in spans}
    extract = next(s for s in spans if s.name == "strataflow.extract")
    parent = by_id[extract.parent_span_id]  # the task run it ran in, a child of the flow run
    assert {a.key: a.value.string_value for a in parent.attributes}["prefect.run.type"] == "task"
    assert parent.parent_span_id == root.span_id
