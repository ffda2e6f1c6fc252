"""Pipeline runs as Prometheus metrics: a textfile rewritten whenever a run closes (no Pushgateway).

node_exporter's textfile collector (`--collector.textfile.directory`), or any agent that reads the
Prometheus text format from a file, picks it up: point it at the directory of STRATAFLOW_METRICS_TEXTFILE
(default STRATAFLOW_HOME/metrics/strataflow_runs.prom). The file is written whole and renamed into place,
so a scrape never reads half of it. Every figure comes from pipeline_runs and llm_calls (all history, so
the counters only grow while rows are kept), labelled by flow (and state, or count name) only: no
namespace, subject or other user text.

- strataflow_pipeline_runs_total{flow, status}: runs by final state (running and crashed included).
- strataflow_pipeline_run_last_finished_timestamp_seconds{flow, status}: when the latest such run ended.
- strataflow_pipeline_run_duration_seconds_sum / _count{flow}: time spent in finished runs.
- strataflow_pipeline_run_count_total{flow, count}: the sum of each number the runs recorded in
  pipeline_runs.counts (rows inserted, messages, items_new, units_failed, llm_calls, ...).
- strataflow_pipeline_llm_calls_total, _llm_tokens_total, _llm_cost_usd_total{flow}: from the LLM ledger.

Every counter of a strataflow flow (alerts.FLOW_NAMES) is written from 0: each state of RUN_STATES, each
count of RunCounts and the LLM totals, before any run of the flow (a CLI stage's states once it has run).
Prometheus's increase() reads a series that first appears at 1 as 0 (it has no earlier sample to compare
with), so without the zeros the first failed (or completed) run of a flow would count 0 in "runs per day".
`strataflow db upgrade` writes the file, so the zeros are there before the first run.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from sqlalchemy import Connection, text
from sqlalchemy.exc import SQLAlchemyError

from models.params import RUN_STATES, RunCounts
from strataflow.config import Settings
from strataflow.db.engine import engine_for
from strataflow.ops.alerts import FLOW_NAMES

logger = logging.getLogger(__name__)

SELECT_RUNS = text(
    """
    select flow, status, count(*) as runs,
           extract(epoch from max(finished_at)) as last_finished,
           coalesce(sum(extract(epoch from finished_at - started_at)), 0) as seconds,
           count(finished_at) as finished
    from pipeline_runs
    group by flow, status
    order by flow, status
    """
)
SELECT_COUNTS = text(
    """
    select pr.flow, c.key as count_name, sum((c.value #>> '{}')::numeric) as total
    from pipeline_runs as pr
    cross join lateral jsonb_each(
        case jsonb_typeof(pr.counts) when 'object' then pr.counts else '{}' end
    ) as c
    where jsonb_typeof(c.value) = 'number'
    group by pr.flow, c.key
    order by pr.flow, c.key
    """
)
SELECT_LLM = text(
    """
    select pr.flow, count(*) as calls,
           coalesce(sum(lc.prompt_tokens + lc.completion_tokens), 0) as tokens,
           coalesce(sum(lc.cost_usd), 0) as cost
    from llm_calls as lc
    join pipeline_runs as pr on pr.run_id = lc.run_id
    group by pr.flow
    order by pr.flow
    """
)


def textfile_path(settings: Settings) -> Path:
    return settings.metrics_textfile or settings.home / "metrics" / "strataflow_runs.prom"


def _label(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _family(lines: list[str], name: str, kind: str, help_text: str) -> None:
    lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]


# The numbers a flow run records (pipeline_runs.counts), each exported from 0 for every flow.
FLOW_COUNTS = tuple(
    name for name, field in RunCounts.model_fields.items() if field.annotation in (int, float)
)


def _from_zero(
    found: dict[tuple[str, str], float], labels: tuple[str, ...], flows: set[str] | None = None
) -> dict[tuple[str, str], float]:
    """The (flow, label) values found, plus a 0 for each label value of every strataflow flow (and of the
    other flows given) not found."""
    every = {(flow, label): 0.0 for flow in set(FLOW_NAMES) | (flows or set()) for label in labels}
    return {**every, **found}


def render(conn: Connection) -> str:
    """The metrics as Prometheus text."""
    runs = conn.execute(SELECT_RUNS).all()
    lines: list[str] = []
    _family(lines, "strataflow_pipeline_runs_total", "counter", "Pipeline runs by flow and final state.")
    seen = {str(r.flow) for r in runs}  # a CLI stage's states from 0 too, once it has run
    by_state = _from_zero({(r.flow, r.status): float(r.runs) for r in runs}, RUN_STATES, seen)
    lines += [
        f'strataflow_pipeline_runs_total{{flow="{_label(flow)}",status="{status}"}} {int(value)}'
        for (flow, status), value in sorted(by_state.items())
    ]
    name = "strataflow_pipeline_run_last_finished_timestamp_seconds"
    _family(lines, name, "gauge", "When the latest run of the flow in that state ended (Unix time).")
    lines += [
        f'{name}{{flow="{_label(r.flow)}",status="{r.status}"}} {float(r.last_finished)}'
        for r in runs
        if r.last_finished is not None
    ]
    _family(lines, "strataflow_pipeline_run_duration_seconds", "summary", "Time spent in finished runs.")
    durations: dict[str, list[float]] = {}
    for r in runs:
        total = durations.setdefault(r.flow, [0.0, 0.0])
        total[0] += float(r.seconds)
        total[1] += float(r.finished)
    for flow, (seconds, finished) in durations.items():
        lines.append(f'strataflow_pipeline_run_duration_seconds_sum{{flow="{_label(flow)}"}} {seconds}')
        lines.append(
            f'strataflow_pipeline_run_duration_seconds_count{{flow="{_label(flow)}"}} {int(finished)}'
        )
    name = "strataflow_pipeline_run_count_total"
    _family(lines, name, "counter", "Sum of each count the runs recorded (rows, items, failures, ...).")
    counts = _from_zero(
        {(r.flow, r.count_name): float(r.total) for r in conn.execute(SELECT_COUNTS)}, FLOW_COUNTS
    )
    lines += [
        f'{name}{{flow="{_label(flow)}",count="{_label(count)}"}} {value}'
        for (flow, count), value in sorted(counts.items())
    ]
    llm = conn.execute(SELECT_LLM).all()
    for metric, column, help_text in (
        ("strataflow_pipeline_llm_calls_total", "calls", "Requests sent to a model by the flow's runs."),
        ("strataflow_pipeline_llm_tokens_total", "tokens", "Prompt + completion tokens of those requests."),
        ("strataflow_pipeline_llm_cost_usd_total", "cost", "Their cost in USD as litellm priced it."),
    ):
        _family(lines, metric, "counter", help_text)
        totals = _from_zero({(r.flow, ""): float(getattr(r, column)) for r in llm}, ("",))
        lines += [f'{metric}{{flow="{_label(flow)}"}} {value}' for (flow, _), value in sorted(totals.items())]
    return "\n".join(lines) + "\n"


def write_textfile(settings: Settings) -> Path | None:
    """Rewrite the metrics file; its path, or None when it could not be written (logged, never raised:
    metrics never fail a run)."""
    path = textfile_path(settings)
    try:
        with engine_for(settings).connect() as conn:
            body = render(conn)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(body, encoding="utf-8")
        os.replace(tmp, path)
    except (OSError, SQLAlchemyError) as exc:
        logger.warning("could not write the run metrics to %s: %s", path, exc)
        return None
    return path
