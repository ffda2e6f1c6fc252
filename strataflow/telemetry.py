"""Traces and timings of memory operations, for the platform's own stack (OpenTelemetry, Prometheus).

Off unless configured, and then cheap: nothing here imports OpenTelemetry until `configure_tracing` is
called with an OTLP endpoint (the standard OTEL_EXPORTER_OTLP_* settings; strataflow.config reads them),
and `span` is a no-op context manager until then.

- `configure_tracing(endpoint, service)`: a TracerProvider with a batching OTLP exporter. The exporter reads
  the other OTEL_EXPORTER_OTLP_* variables itself (protocol http/protobuf, headers, timeout); grpc needs
  the grpc exporter installed. The API server, `strataflow mcp` and the flows call it once per process.
- `span(operation, **attributes)`: one span per memory operation (search, context, write, extract, rollup,
  ...). Attributes use the GenAI semantic conventions where they define a name (`gen_ai.operation.name`,
  `gen_ai.request.model`, `gen_ai.usage.input_tokens`, ...) and `strataflow.*` otherwise. A namespace
  goes in as `strataflow.namespace.hash` (namespace_hash), never as text, and no attribute ever holds user
  text (queries, messages, subject ids).
- `observe(name, seconds)`: a timing (embed_on_write, ...) handed to whoever registered an observer (the
  API's Prometheus metrics, strataflow.service.metrics); nothing when nobody listens.

Other instrumentation in the process exports too: FastAPI's own telemetry (on as soon as a tracer provider
exists) puts the request's path and query string on its server spans (`url.path`, `url.query`: a context
query's words, a subject id in `/v1/profiles/{subject}`), and an exception event can quote a value. Nothing
of that leaves the process: `configure_tracing` adds `Redact`, a span processor that overwrites those
attributes as a span starts (every processor and exporter of the provider sees the redacted values), and
wraps its own exporter in `RedactingExporter`, which exports each span with only what REDACTED_ATTRIBUTES
leaves (the path becomes its route template; exception events keep their type; no status description).
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from strataflow.config import Settings

logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])
TRACER_NAME = "strataflow"
# Result fields recorded on a span when the traced function returns them (counts, never text).
RESULT_FIELDS = ("llm_calls", "tokens", "cost_usd", "units_failed", "scopes", "messages", "items_new",
                 "items_changed", "reports_written", "accepted", "quarantined")  # fmt: skip
Observer = Callable[[str, float], None]

# Span attributes that can hold user text or ids (OpenTelemetry's HTTP conventions, old and new names): never
# exported. `url.path` is replaced by the route template (http.route) where the span has one.
REDACTED_ATTRIBUTES = frozenset({
    "url.query", "url.full", "url.path", "url.original", "http.target", "http.url",
    "http.request.method_original", "exception.message", "exception.stacktrace", "db.statement",
    "db.query.text",
})  # fmt: skip
REDACTED = "[redacted]"

_tracer: Any = None
_processor: Any = None  # the span processor configure_tracing added (shut down by flush_and_stop)
_observers: list[Observer] = []


def namespace_hash(namespace: str) -> str:
    """How traces name a namespace: the first 16 hex digits of its sha256 (stable, not reversible by eye)."""
    return hashlib.sha256(namespace.encode("utf-8")).hexdigest()[:16]


def configure_tracing(endpoint: str | None, service: str, protocol: str = "http/protobuf") -> bool:
    """Export spans over OTLP when an endpoint is configured; True when tracing is on. Idempotent."""
    global _tracer, _processor
    if _tracer is not None:
        return True
    if not endpoint:
        return False
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        logger.warning(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set but OpenTelemetry is not installed: "
            "pip install -e '.[observability]'; no spans are exported"
        )
        return False
    exporter = _otlp_exporter(protocol, endpoint)
    if exporter is None:
        return False
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):  # another part of the process set one up: add to it
        provider = current
    else:
        provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}))
        trace.set_tracer_provider(provider)
    provider.add_span_processor(_redact_processor())
    _processor = BatchSpanProcessor(_redacting(exporter), schedule_delay_millis=1000)
    provider.add_span_processor(_processor)
    _tracer = trace.get_tracer(TRACER_NAME)
    logger.info("exporting OpenTelemetry spans to %s", endpoint)
    return True


def configure_from(settings: Settings, service: str) -> bool:
    """configure_tracing from the settings (OTEL_EXPORTER_OTLP_*, OTEL_SERVICE_NAME over `service`): the
    traces endpoint as given, else the base endpoint (+ /v1/traces over HTTP, as the OTLP spec says)."""
    endpoint = settings.otel_traces_endpoint
    if endpoint is None and settings.otel_endpoint:
        base = settings.otel_endpoint.rstrip("/")
        endpoint = base if settings.otel_protocol == "grpc" else f"{base}/v1/traces"
    return configure_tracing(endpoint, settings.otel_service_name or service, settings.otel_protocol)


def _otlp_exporter(protocol: str, endpoint: str) -> Any:
    """The OTLP span exporter for the protocol and endpoint (it reads headers and timeout itself)."""
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        logger.warning("no OTLP exporter for protocol %s is installed: no spans are exported", protocol)
        return None
    return OTLPSpanExporter(endpoint=endpoint)


def _redact_processor() -> Any:
    """A span processor that overwrites REDACTED_ATTRIBUTES as a span starts (module docstring)."""
    from opentelemetry.sdk.trace import SpanProcessor

    class Redact(SpanProcessor):
        def on_start(self, span: Any, parent_context: Any = None) -> None:
            for key in REDACTED_ATTRIBUTES & set(span.attributes or {}):
                span.set_attribute(key, REDACTED)

    return Redact()


def redacted_span(span: Any) -> Any:
    """The span as exported: without REDACTED_ATTRIBUTES (url.path becomes the route template), exception
    events with their type only, no status description."""
    from opentelemetry.sdk.trace import Event, ReadableSpan
    from opentelemetry.trace import Status

    attributes = {k: v for k, v in (span.attributes or {}).items() if k not in REDACTED_ATTRIBUTES}
    route = attributes.get("http.route")
    if "url.path" in (span.attributes or {}) and isinstance(route, str):
        attributes["url.path"] = route
    events = [
        Event(
            e.name,
            {k: v for k, v in (e.attributes or {}).items() if k not in REDACTED_ATTRIBUTES},
            e.timestamp,
        )
        for e in span.events
    ]
    return ReadableSpan(
        name=span.name.split("?", 1)[0], context=span.context, parent=span.parent, resource=span.resource,
        attributes=attributes, events=events, links=span.links, kind=span.kind,
        status=Status(span.status.status_code), start_time=span.start_time, end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )  # fmt: skip


def _redacting(exporter: Any) -> Any:
    """The exporter, given every span as redacted_span makes it."""
    from opentelemetry.sdk.trace.export import SpanExporter

    class RedactingExporter(SpanExporter):
        def export(self, spans: Any) -> Any:
            return exporter.export([redacted_span(span) for span in spans])

        def shutdown(self) -> None:
            exporter.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return bool(exporter.force_flush(timeout_millis))

    return RedactingExporter()


def tracing_enabled() -> bool:
    return _tracer is not None


def flush_and_stop() -> None:
    """Export what is buffered and stop tracing in this process (spans become no-ops again). The processor
    is shut down too: left on the global provider, it would try its exporter again at the process's exit,
    and others' spans (Prefect's) would go to an endpoint that may be gone."""
    global _tracer, _processor
    if _tracer is None:
        return
    if _processor is not None:
        _processor.shutdown()  # exports what it holds first
    _tracer = _processor = None


@contextmanager
def span(operation: str, **attributes: Any) -> Iterator[Callable[..., None]]:
    """A span named `strataflow.<operation>` around the block (a no-op when tracing is off). Yields a
    function that adds attributes once they are known (counts, tokens)."""
    if _tracer is None:
        yield _ignore
        return
    with _tracer.start_as_current_span(f"strataflow.{operation}") as current:
        current.set_attribute("strataflow.operation", operation)

        def add(**more: Any) -> None:
            for key, value in more.items():
                if value is not None:
                    current.set_attribute(_attribute_name(key), value)

        add(**attributes)
        yield add


def traced(operation: str, model_setting: str | None = None) -> Callable[[F], F]:
    """Decorate a memory operation: a span `strataflow.<operation>` with gen_ai.operation.name, the
    namespace's hash (its `namespace` argument), the model (gen_ai.request.model: the named setting of its
    `settings` argument) and the counts its result carries (RESULT_FIELDS). Free when tracing is off."""

    def decorate(function: F) -> F:
        signature = inspect.signature(function)

        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if _tracer is None:
                return function(*args, **kwargs)
            bound = signature.bind_partial(*args, **kwargs).arguments
            namespace, settings = bound.get("namespace"), bound.get("settings")
            with span(operation, gen_ai__operation__name=operation) as add:
                if isinstance(namespace, str):
                    add(strataflow__namespace__hash=namespace_hash(namespace))
                if model_setting and isinstance(settings, Settings):
                    add(gen_ai__request__model=str(getattr(settings, model_setting)))
                result = function(*args, **kwargs)
                for field in RESULT_FIELDS:
                    value = getattr(result, field, None)
                    if isinstance(value, int | float) and not isinstance(value, bool):
                        add(**{f"strataflow__{field}": value})
                return result

        return wrapper  # type: ignore[return-value]

    return decorate


def _attribute_name(key: str) -> str:
    """Keyword names as attribute names: gen_ai__operation__name -> gen_ai.operation.name."""
    return key.replace("__", ".")


def _ignore(**_: Any) -> None:
    return None


def add_observer(observer: Observer) -> None:
    if observer not in _observers:
        _observers.append(observer)


def remove_observer(observer: Observer) -> None:
    if observer in _observers:
        _observers.remove(observer)


def observe(name: str, seconds: float) -> None:
    """Hand a timing to the registered observers (none: nothing happens)."""
    for observer in list(_observers):
        observer(name, seconds)


@contextmanager
def timed(name: str) -> Iterator[None]:
    """observe(name, the block's duration) when anybody listens."""
    if not _observers:
        yield
        return
    started = time.perf_counter()
    try:
        yield
    finally:
        observe(name, time.perf_counter() - started)
