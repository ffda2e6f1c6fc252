"""Prometheus metrics and OpenTelemetry spans of the API (STRATAFLOW_API_METRICS, OTEL_EXPORTER_OTLP_*).

`install(app, settings, engine)` adds one ASGI middleware, outermost, and with STRATAFLOW_API_METRICS=true
the route `GET /metrics` (Prometheus text, no key: bind the API to 127.0.0.1 or put it behind the proxy
that guards the rest). Nothing of prometheus_client or OpenTelemetry is imported when both are off.

Metrics (each app has its own registry, so two apps in one process never share counts):
- strataflow_http_request_duration_seconds{method, route, status}: a histogram per route template
  (/v1/memories/{item_id}, never the id itself) and status code; unmatched paths count as route "other",
  and a method outside METHODS (HTTP's own) as method "other": no label takes a value a client makes up.
- strataflow_http_rate_limited_total{route}: requests refused with 429 by the rate limit.
- strataflow_db_pool_connections{state}: the pool's checked-out, idle and overflow connections, and its size.
- strataflow_embed_on_write_seconds: encoding an item's vector while writing it (strataflow.telemetry.timed).

Spans (OTLP): one `strataflow.http` span per request that names a memory operation (context, search,
write, ...) with `gen_ai.operation.name`, `http.route`, `http.response.status_code` and the namespace's
hash once the key is known; never a query, a message or a subject id. A Prometheus scrape and the
orchestrator's probes (UNTRACED: /metrics, /healthz, /readyz) make no span, neither ours nor FastAPI's own
(the app passes `untraced` as its telemetry's `exclude`): otherwise every scrape was a trace of its own.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from typing import Any

from fastapi import FastAPI
from sqlalchemy import Engine
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from strataflow import telemetry
from strataflow.config import Settings
from strataflow.service.deps import declared
from strataflow.service.keys import Caller

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# The methods a label may name (RFC 9110's and PATCH); any other is "other" (a client could make up millions).
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT", "TRACE"})
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


UNTRACED = frozenset({"/metrics", "/healthz", "/readyz"})  # scrapes and probes: no trace each time


def untraced(scope: Any) -> bool:
    """True for a request that makes no span (a scrape, a probe): FastAPI's telemetry `exclude`."""
    return scope.get("type") == "http" and scope.get("path") in UNTRACED


def operation_of(scope: Scope) -> str | None:
    """The memory operation of a routed request: what its route declared (deps.work), "mcp" for /mcp."""
    route = scope.get("route")
    work = declared(route)
    if work is not None:
        return work.operation
    return "mcp" if getattr(route, "path", None) == "/mcp" else None


class Metrics:
    """The registry and instruments of one app."""

    def __init__(self, engine: Engine) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram
        from prometheus_client.core import GaugeMetricFamily

        self.registry = CollectorRegistry(auto_describe=True)
        self.duration = Histogram(
            "strataflow_http_request_duration_seconds",
            "Time from the request's first byte to the response's last, per route template and status.",
            ["method", "route", "status"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.rate_limited = Counter(
            "strataflow_http_rate_limited",
            "Requests the rate limit refused (429).",
            ["route"],
            registry=self.registry,
        )
        self.embed_on_write = Histogram(
            "strataflow_embed_on_write_seconds",
            "Encoding a memory item's vector while it is written (online writes, save_info, extraction).",
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )

        class PoolCollector:
            def collect(self) -> Any:
                pool: Any = engine.pool
                gauge = GaugeMetricFamily(
                    "strataflow_db_pool_connections",
                    "Connections of this process's database pool by state (size: the configured pool size).",
                    labels=["state"],
                )
                for state, read in (
                    ("checked_out", "checkedout"),
                    ("idle", "checkedin"),
                    ("overflow", "overflow"),
                    ("size", "size"),
                ):
                    value = getattr(pool, read, None)
                    if callable(value):
                        gauge.add_metric([state], max(float(value()), 0.0))
                yield gauge

        self.registry.register(PoolCollector())

    def observe(self, name: str, seconds: float) -> None:
        if name == "embed_on_write":
            self.embed_on_write.observe(seconds)

    def exposition(self) -> bytes:
        from prometheus_client import generate_latest

        return bytes(generate_latest(self.registry))


class Observe:
    """ASGI middleware: each HTTP request's duration by route template and status (with metrics on), and a
    span per memory operation (with tracing on)."""

    def __init__(self, app: ASGIApp, metrics: Metrics | None, routes: list[Any]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path") == "/metrics":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        route = "other"
        with nullcontext(_no_attributes) if untraced(scope) else telemetry.span("http") as add:
            try:
                await self.app(scope, receive, sending)
            finally:
                route = _route(scope, self.routes)
                method = method_label(scope)
                add(
                    http__request__method=method,
                    http__route=route,
                    http__response__status_code=status,
                    gen_ai__operation__name=operation_of(scope),
                    strataflow__namespace__hash=_namespace_hash(scope),
                )
                if self.metrics is not None:
                    self.metrics.duration.labels(method, route, str(status)).observe(
                        time.perf_counter() - started
                    )
                    if status == 429:
                        self.metrics.rate_limited.labels(route).inc()


def _no_attributes(**_: Any) -> None:
    return None


def method_label(scope: Scope) -> str:
    """The request's method as a label or span attribute: one of METHODS, else "other"."""
    method = str(scope.get("method", "GET"))
    return method if method in METHODS else "other"


def _route(scope: Scope, routes: list[Any]) -> str:
    """The route's template (never the concrete path: ids and names stay out of labels), without its
    converters (/v1/memories/{item_id}, not {item_id:int}): a request refused before routing (the rate
    limit, the body limit) is matched here against the app's routes and gets the same label as one served."""
    matched = scope.get("route")
    path = getattr(matched, "path_format", None) or getattr(matched, "path", None)
    if isinstance(path, str):
        return path
    found = _template(scope, routes)
    if found is not None:
        return found
    raw = str(scope.get("path", ""))
    for mount in ("/mcp", "/mem0"):
        if raw == mount or raw.startswith(mount + "/"):
            return mount
    return "other"


def _template(scope: Scope, routes: list[Any]) -> str | None:
    for candidate in routes:
        path = getattr(candidate, "path", None)
        if isinstance(path, str) and path:
            match, _ = candidate.matches(scope)
            if match == Match.FULL:
                return str(getattr(candidate, "path_format", None) or path)
        elif hasattr(candidate, "effective_route_contexts"):  # a router included by FastAPI >= 0.150
            method = scope.get("method")
            for context in candidate.effective_route_contexts():
                regex, methods = getattr(context, "path_regex", None), getattr(context, "methods", None)
                if (
                    regex is not None
                    and regex.match(str(scope.get("path", "")))
                    and (not methods or method in methods)
                ):
                    return str(context.path_format)
    return None


def _namespace_hash(scope: Scope) -> str | None:
    """The hash of the namespace the request acted in, once its caller was identified (scope state)."""
    state = scope.get("state") or {}
    caller = state.get("caller") if isinstance(state, dict) else None
    if not isinstance(caller, Caller) or not caller.namespace:
        return None
    return telemetry.namespace_hash(caller.namespace)


def install(app: FastAPI, settings: Settings, engine: Engine) -> None:
    """Metrics and spans for this app, as the settings ask (nothing at all when both are off)."""
    tracing = telemetry.configure_from(settings, "strataflow-api")
    if not (settings.api_metrics or tracing):
        return
    metrics = Metrics(engine) if settings.api_metrics else None
    if metrics is not None:
        telemetry.add_observer(metrics.observe)
        app.state.metrics = metrics

        @app.get("/metrics", include_in_schema=False)
        def prometheus_metrics(request: Request) -> Response:
            return Response(metrics.exposition(), media_type=CONTENT_TYPE)

    app.add_middleware(Observe, metrics=metrics, routes=app.router.routes)
