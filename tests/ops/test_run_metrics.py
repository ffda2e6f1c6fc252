"""Pipeline runs as Prometheus metrics in a textfile (strataflow/ops/run_metrics.py)."""

from __future__ import annotations

import uuid
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine

from models.results import IngestResult
from strataflow.config import Settings
from strataflow.ops import run_metrics
from strataflow.pipeline import runs


def test_closed_runs_are_counted_per_flow_and_state_in_a_parseable_textfile(
    engine: Engine, settings: Settings, tmp_path: Path
) -> None:
    flow = f"ingest_{uuid.uuid4().hex[:6]}"
    for _ in range(2):
        runs.record_run(engine, flow, {}, "metrics_ns", lambda run_id: IngestResult(read=5, inserted=4))
    path = run_metrics.write_textfile(settings.model_copy(update={"metrics_textfile": tmp_path / "sf.prom"}))
    assert path == tmp_path / "sf.prom"
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(path.read_text(encoding="utf-8"))
        for s in family.samples
    }
    assert samples[("strataflow_pipeline_runs_total", (("flow", flow), ("status", "completed")))] == 2
    assert samples[("strataflow_pipeline_run_count_total", (("count", "inserted"), ("flow", flow)))] == 8
    assert ("strataflow_pipeline_run_duration_seconds_count", (("flow", flow),)) in samples
    assert "metrics_ns" not in path.read_text(encoding="utf-8")  # no namespace, subject or other user text
