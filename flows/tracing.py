"""One OpenTelemetry trace per flow run, with its task runs and the stages' spans as children.

Prefect records a span for every flow run and task run with the process's global tracer provider, and makes
a task run's span a child of its flow run's (the flow run's `__OTEL_TRACEPARENT` label); a stage's own span
(`strataflow.extract`, `strataflow.rollup`, ...) is a child of the task run it runs in. That gives one trace
per flow run only if the provider exists before Prefect opens the flow run's span; when it does not, the flow
run's span is a no-op and each task run starts a trace of its own (a nightly was seven traces). In a
deployment's process Prefect opens that span right after it imports the flow's module, before any of the
flow's code runs, so every flow module calls `trace_flow_runs()` when it is imported. Without an OTLP
endpoint (OTEL_EXPORTER_OTLP_*) it reads the settings and does nothing else.
"""

from __future__ import annotations

from strataflow import telemetry
from strataflow.config import load_settings

SERVICE = "strataflow-flows"


def trace_flow_runs() -> bool:
    """Set up span export for this process's flow runs, as the settings ask; True when tracing is on."""
    return telemetry.configure_from(load_settings(), SERVICE)
