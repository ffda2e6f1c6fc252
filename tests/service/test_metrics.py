"""Metrics and traces of the API (strataflow/service/metrics.py, strataflow/telemetry.py): with
STRATAFLOW_API_METRICS=true, GET /metrics answers Prometheus text with request-duration histograms per route
template and status, the rate limit's refusals and the pool; with an OTLP endpoint, memory operations reach
a real OTLP/HTTP receiver as spans that carry the namespace's hash and never its text."""

from __future__ import annotations

import http.server
import socket
import threading
import uuid
from collections.abc import Iterator

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine

from strataflow import telemetry
from strataflow.config import Settings
from strataflow.retrieval.context import build_context
from tests.fixtures.service import Tenant, _serve


@pytest.fixture(scope="module")
def metrics_url(engine: Engine, settings: Settings) -> Iterator[str]:
    yield from _serve(
        settings.model_copy(update={"api_metrics": True, "api_rate_per_s": 0.01, "api_rate_burst": 3})
    )


def test_metrics_are_off_unless_asked(api_url: str) -> None:
    assert httpx.get(f"{api_url}/metrics", timeout=30).status_code == 404


def test_metrics_show_request_durations_per_route_template_refusals_and_the_pool(
    metrics_url: str, tenants: dict[str, Tenant], subject: str
) -> None:
    with tenants["alpha"].client(metrics_url) as client:
        statuses = [
            client.get("/v1/context", params={"subject": subject, "query": "where do I live"}).status_code
            for _ in range(5)
        ]
    assert statuses[0] == 200 and 429 in statuses
    scraped = httpx.get(f"{metrics_url}/metrics", timeout=30)
    assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
    text = scraped.text
    bucket = 'strataflow_http_request_duration_seconds_bucket{le="+Inf",method="GET",route="/v1/context",'
    assert bucket + 'status="200"}' in text
    assert 'route="/v1/context",status="429"' in text, [line for line in text.splitlines() if "429" in line]
    assert 'strataflow_http_rate_limited_total{route="/v1/context"}' in text
    assert 'strataflow_db_pool_connections{state="size"}' in text
    assert subject not in text  # labels carry route templates, never what a request named


class Receiver(http.server.BaseHTTPRequestHandler):
    bodies: list[tuple[str, bytes]] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        Receiver.bodies.append((self.path, body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return None


def test_a_context_call_reaches_an_otlp_receiver_as_a_span_without_user_text(
    engine: Engine, settings: Settings
) -> None:
    server = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"  # as OTEL_EXPORTER_OTLP_ENDPOINT: + /v1/traces
    try:
        traced = settings.model_copy(update={"otel_endpoint": endpoint, "otel_service_name": "sf-test"})
        assert telemetry.configure_from(traced, "strataflow-test")
        with engine.connect() as conn:
            build_context(conn, settings, "ns-private-name", "subject-private", "my secret question")
        telemetry.flush_and_stop()
    finally:
        server.shutdown()
    assert Receiver.bodies and Receiver.bodies[0][0] == "/v1/traces"
    request = ExportTraceServiceRequest()
    request.ParseFromString(Receiver.bodies[0][1])
    spans = [s for r in request.resource_spans for ss in r.scope_spans for s in ss.spans]
    context = next(s for s in spans if s.name == "strataflow.context")
    attributes = {a.key: a.value.string_value for a in context.attributes}
    assert attributes["gen_ai.operation.name"] == "context"
    assert attributes["strataflow.namespace.hash"] == telemetry.namespace_hash("ns-private-name")
    raw = b"".join(body for _, body in Receiver.bodies)
    assert b"ns-private-name" not in raw and b"subject-private" not in raw and b"secret question" not in raw


def test_an_api_memory_write_is_timed_as_embed_on_write(metrics_url: str, tenants: dict[str, Tenant]) -> None:
    def written() -> float:
        scraped = httpx.get(f"{metrics_url}/metrics", timeout=30).text
        samples = [
            s.value
            for family in text_string_to_metric_families(scraped)
            for s in family.samples
            if s.name == "strataflow_embed_on_write_seconds_count"
        ]
        return sum(samples)

    before = written()
    with tenants["beta"].client(metrics_url) as client:
        body = {"subject": f"u{uuid.uuid4().hex[:6]}", "type": "feedback", "name": "tone", "content": "terse"}
        assert client.post("/v1/memories", json=body).status_code == 201
    assert written() == before + 1  # the item's vector, encoded while it was written


def test_scrapes_and_probes_make_no_spans_and_a_memory_operation_one(
    engine: Engine, settings: Settings, tenants: dict[str, Tenant], subject: str
) -> None:
    Receiver.bodies = []
    server = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    update = {"api_metrics": True, "otel_endpoint": endpoint, "api_rate_per_s": 0.0}
    traced = settings.model_copy(update=update)
    serving = _serve(traced)
    url = next(serving)
    try:
        for _ in range(3):  # Prometheus every few seconds, and the orchestrator's probes
            for path in ("/metrics", "/readyz", "/healthz"):
                assert httpx.get(f"{url}{path}", timeout=30).status_code == 200
        with tenants["alpha"].client(url) as client:
            assert client.get("/v1/context", params={"subject": subject, "query": "where"}).status_code == 200
        next(serving, None)  # the server's spans end after its answer is sent: stop it before flushing
        telemetry.flush_and_stop()
    finally:
        next(serving, None)
        server.shutdown()
    request = ExportTraceServiceRequest()
    spans = []
    for _, body in Receiver.bodies:
        request.ParseFromString(body)
        spans += [s for r in request.resource_spans for ss in r.scope_spans for s in ss.spans]
    routes = {a.value.string_value for s in spans for a in s.attributes if a.key == "http.route"}
    assert routes == {"/v1/context"}, routes
    assert len({s.trace_id for s in spans if s.name == "strataflow.http"}) == 1


def test_made_up_methods_add_no_series(metrics_url: str) -> None:
    """R4: the method label is one of HTTP's methods or "other", whatever a client sends."""
    host, port = metrics_url.removeprefix("http://").split(":")
    before = httpx.get(f"{metrics_url}/metrics", timeout=30).text
    for index in range(30):
        with socket.create_connection((host, int(port)), timeout=10) as sock:
            sock.sendall(
                f"X{index:07d}Z /v1/context HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
            )
            while sock.recv(65536):
                pass
    after = httpx.get(f"{metrics_url}/metrics", timeout=30).text
    assert "X0000001Z" not in after and 'method="other"' in after
    assert len(after) - len(before) < 5_000, len(after) - len(before)


def test_no_exported_span_holds_a_query_a_subject_or_a_path_id(
    engine: Engine, settings: Settings, tenants: dict[str, Tenant]
) -> None:
    """R3: FastAPI's own server spans carry the path and the query string; what leaves the process has
    neither (the path becomes its route template), for GET and POST /v1/context and a profile path."""
    Receiver.bodies = []
    server = http.server.HTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}"
    word, subject = f"ZEBRA{uuid.uuid4().hex[:8].upper()}CANARY", f"subj_{uuid.uuid4().hex[:8]}_canary"
    traced = settings.model_copy(update={"otel_endpoint": endpoint, "api_rate_per_s": 0.0})
    try:
        for url in _serve(traced):
            with tenants["beta"].client(url) as client:
                asked = {"subject": subject, "query": f"what does {word} do?"}
                assert client.get("/v1/context", params=asked).status_code == 200
                assert client.post("/v1/context", json=asked).status_code == 200
                assert client.get(f"/v1/profiles/{subject}/user").status_code == 200
                assert client.get("/v1/context", params={"subject": subject}).status_code == 422
        telemetry.flush_and_stop()
    finally:
        server.shutdown()
    raw = b"".join(body for _, body in Receiver.bodies).lower()
    assert raw, "no spans reached the receiver"
    assert word.lower().encode() not in raw and subject.encode() not in raw
    paths = {
        a.value.string_value
        for body in Receiver.bodies
        for r in _parsed(body[1]).resource_spans
        for ss in r.scope_spans
        for s in ss.spans
        for a in s.attributes
        if a.key == "url.path"
    }
    assert "/v1/profiles/{subject}/user" in paths, paths


def _parsed(body: bytes) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    return request


def test_a_refused_request_and_a_served_one_share_their_route_label(
    metrics_url: str, tenants: dict[str, Tenant]
) -> None:
    with tenants["both"].client(metrics_url, **{"X-Namespace": tenants["both"].namespace}) as client:
        statuses = {client.get("/v1/memories/999999999").status_code for _ in range(6)}
    assert statuses == {404, 429}
    text = httpx.get(f"{metrics_url}/metrics", timeout=30).text
    routes = {line.split('route="')[1].split('"')[0] for line in text.splitlines() if "/v1/memories/" in line}
    assert routes == {"/v1/memories/{item_id}"}, routes  # the refusals' and the answers' alike
    assert 'strataflow_http_rate_limited_total{route="/v1/memories/{item_id}"}' in text
