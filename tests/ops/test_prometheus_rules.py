"""The Grafana dashboard (docs/grafana-dashboard.json) and the Prometheus rules beside it
(docs/prometheus-rules.yml) read what strataflow exports: every selector names a metric of the API's
/metrics or of the runs' textfile, with count, flow and state values the flows write (not only the CLI
stages' names). With promtool installed (Debian's `prometheus` package), promtool checks the rules and every
panel's PromQL, and evaluates them on series of its own: a flow's first failed run counts 1 in "runs per
day" (the textfile starts its counters at 0), the 5xx share is 0 without errors, and the alerts fire on
failed runs, stale flows, 5xx and refusals."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine

from bench.dashboard import concrete, panel_queries
from models.params import RUN_STATES
from models.results import IngestResult
from strataflow.ops import run_metrics
from strataflow.ops.alerts import FLOW_NAMES
from strataflow.pipeline import runs

DOCS = Path(__file__).resolve().parents[2] / "docs"
DASHBOARD = DOCS / "grafana-dashboard.json"
RULES = DOCS / "prometheus-rules.yml"
SELECTOR = re.compile(r"\b(strataflow_[A-Za-z0-9_]+)\s*(?:\{([^}]*)\})?")
MATCHER = re.compile(r'(\w+)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


def dashboard_queries() -> list[tuple[str, str]]:
    """(panel title, PromQL) of every panel, Grafana's variables replaced as a data source would."""
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return [(title, concrete(expr)) for title, expr in panel_queries(dashboard)]


def rule_queries() -> list[tuple[str, str]]:
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    return [(rule.get("record") or rule["alert"], rule["expr"]) for g in groups for rule in g["rules"]]


def _exported(engine: Engine) -> set[str]:
    """Metric names of the API's /metrics (one request of each kind observed) and of the runs' textfile
    (after a closed run)."""
    from strataflow.service.metrics import Metrics

    api = Metrics(engine)
    api.duration.labels("GET", "/v1/context", "200").observe(0.1)
    api.rate_limited.labels("/v1/context").inc()
    api.observe("embed_on_write", 0.01)
    runs.record_run(engine, "nightly", {}, None, lambda run_id: IngestResult(read=1, inserted=1))
    with engine.connect() as conn:
        texts = [api.exposition().decode("utf-8"), run_metrics.render(conn)]
    return {s.name for text in texts for f in text_string_to_metric_families(text) for s in f.samples}


def test_every_selector_names_an_exported_metric_and_values_the_flows_write(engine: Engine) -> None:
    exported = _exported(engine)
    values = {"flow": set(FLOW_NAMES), "status": set(RUN_STATES), "count": set(run_metrics.FLOW_COUNTS)}
    checked = 0
    for title, expr in dashboard_queries() + rule_queries():
        for name, matchers in SELECTOR.findall(expr):
            assert name in exported, f"{title}: {name} is not exported"
            for label, op, value in MATCHER.findall(matchers):
                if label in values and op in ("=", "=~"):
                    wanted = values[label] if name.startswith("strataflow_pipeline") else set()
                    assert not wanted or any(re.fullmatch(value, have) for have in wanted), (
                        f"{title}: {label}{op}{value!r} matches nothing a flow writes"
                    )
            checked += 1
    assert checked >= 20


def test_the_textfile_starts_every_flow_counter_at_zero(engine: Engine) -> None:
    with engine.connect() as conn:
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(run_metrics.render(conn))
            for s in family.samples
        }
    for flow in FLOW_NAMES:
        for status in RUN_STATES:
            assert ("strataflow_pipeline_runs_total", (("flow", flow), ("status", status))) in samples
        for count in ("units_failed", "rows_quarantined", "rows_inserted", "l2_new"):
            assert ("strataflow_pipeline_run_count_total", (("count", count), ("flow", flow))) in samples
        assert ("strataflow_pipeline_llm_tokens_total", (("flow", flow),)) in samples


needs_promtool = pytest.mark.skipif(
    shutil.which("promtool") is None, reason="promtool is not installed (apt-get install prometheus)"
)


def _promtool(*args: str) -> str:
    done = subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@needs_promtool
def test_promtool_loads_the_rules_and_every_panel_query(tmp_path: Path) -> None:
    assert "SUCCESS: 15 rules found" in _promtool("check", "rules", str(RULES))
    panels = [
        {"record": f"strataflow:panel_{i}", "expr": expr} for i, (_, expr) in enumerate(dashboard_queries())
    ]
    as_rules = tmp_path / "panels.yml"
    as_rules.write_text(yaml.safe_dump({"groups": [{"name": "panels", "rules": panels}]}), encoding="utf-8")
    assert f"SUCCESS: {len(panels)} rules found" in _promtool("check", "rules", str(as_rules))


def _panel(title: str) -> str:
    return next(expr for name, expr in dashboard_queries() if name == title)


@needs_promtool
def test_promtool_evaluates_the_panels_and_the_alerts(tmp_path: Path) -> None:
    runs = _panel("Runs per day by flow and state")
    errors = _panel("Server errors (5xx) share")
    http = 'strataflow_http_request_duration_seconds_count{job="api",method="GET",route="/v1/context"'
    runs_total = 'strataflow_pipeline_runs_total{job="runs",flow="nightly"'
    cases = {
        "rule_files": [str(RULES)],
        "evaluation_interval": "1m",
        "tests": [
            {  # N5: the textfile's counters start at 0, so the first failed run counts 1, not 0
                "interval": "1m",
                "input_series": [
                    {
                        "series": runs_total + ',status="failed"}',
                        "values": "0 0 0 1 1 1",
                    },
                    {
                        "series": runs_total + ',status="completed"}',
                        "values": "0 0 0 0 0 0",
                    },
                    {"series": http + ',status="200"}', "values": "0+60x30"},
                ],
                "promql_expr_test": [
                    {
                        "expr": runs,
                        "eval_time": "5m",
                        "exp_samples": [
                            {"labels": '{flow="nightly",status="failed"}', "value": 1},
                            {"labels": '{flow="nightly",status="completed"}', "value": 0},
                        ],
                    },
                    {"expr": errors, "eval_time": "10m", "exp_samples": [{"labels": "{}", "value": 0}]},
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "5m",
                        "alertname": "StrataflowRunFailedOrCrashed",
                        "exp_alerts": [
                            {
                                "exp_labels": {"severity": "warning", "flow": "nightly", "status": "failed"},
                                "exp_annotations": {
                                    "summary": "strataflow nightly: a run ended failed in the last hour",
                                    "description": _annotation("StrataflowRunFailedOrCrashed"),
                                },
                            },
                        ],
                    },
                    {"eval_time": "20m", "alertname": "StrataflowHigh5xxShare", "exp_alerts": []},
                ],
            },
            {  # a nightly whose last completed run ended 27 hours ago; 10% of the API's answers are 5xx
                "interval": "1m",
                "input_series": [
                    {  # a sample a minute, as scraped: the recording rule's lookback finds one
                        "series": 'strataflow_pipeline_run_last_finished_timestamp_seconds{job="runs",'
                        'flow="nightly",status="completed"}',
                        "values": "0x1800",
                    },
                ],
                "alert_rule_test": [
                    {"eval_time": "20h", "alertname": "StrataflowDailyFlowStale", "exp_alerts": []},
                    {
                        "eval_time": "27h",
                        "alertname": "StrataflowDailyFlowStale",
                        "exp_alerts": [
                            {
                                "exp_labels": {"severity": "warning", "flow": "nightly"},
                                "exp_annotations": {
                                    "summary": "strataflow nightly: no completed run for 27 hours",
                                    "description": _annotation("StrataflowDailyFlowStale"),
                                },
                            },
                        ],
                    },
                ],
            },
            {
                "interval": "1m",
                "input_series": [
                    {"series": http + ',status="200"}', "values": "0+54x30"},
                    {"series": http + ',status="500"}', "values": "0+6x30"},
                    {
                        "series": 'strataflow_http_rate_limited_total{job="api",route="/v1/context"}',
                        "values": "0+0x30",
                    },
                ],
                "promql_expr_test": [
                    {"expr": errors, "eval_time": "10m", "exp_samples": [{"labels": "{}", "value": 0.1}]},
                ],
                "alert_rule_test": [
                    {
                        "eval_time": "25m",
                        "alertname": "StrataflowHigh5xxShare",
                        "exp_alerts": [
                            {
                                "exp_labels": {"severity": "critical", "job": "api"},
                                "exp_annotations": {
                                    "summary": "strataflow API api: 10% of responses are 5xx",
                                    "description": _annotation("StrataflowHigh5xxShare"),
                                },
                            },
                        ],
                    },
                    {"eval_time": "25m", "alertname": "StrataflowRateLimited", "exp_alerts": []},
                ],
            },
        ],
    }
    path = tmp_path / "cases.yml"
    path.write_text(yaml.safe_dump(cases, sort_keys=False), encoding="utf-8")
    assert "SUCCESS" in _promtool("test", "rules", str(path))


def _annotation(alert: str) -> str:
    groups = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    rule = next(r for g in groups for r in g["rules"] if r.get("alert") == alert)
    return str(rule["annotations"]["description"])
