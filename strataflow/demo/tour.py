"""`strataflow demo`: the tour a newcomer runs first.

Embedded database, the bilingual sample (generated once, then reused), the backfill flow over it through
Prefect (ephemeral API), the sample assets through the assets flow, then what each layer now holds. A
second run reuses the sample and every result, so it makes no LLM call.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, text

from models.params import RunSummary
from strataflow.config import Settings
from strataflow.errors import UserError

SAMPLE_SUBJECTS = 4
SAMPLE_WEEKS = 6
DEMO_QUESTION = "这位客户的学历、工作和目标移民项目是什么？"
MARKER = ".strataflow-demo"  # no log extension: ingest must not read it

COUNT_LAYERS = text(
    """
    select
        (select count(*) from conversation_messages) as l1_messages,
        (select count(*) from conversation_messages where embedding is not null) as l1_embedded,
        (select count(*) from memory_items where status = 'active') as l2_items,
        (select count(*) from memory_item_versions) as l2_versions,
        (select count(*) from weekly_reports) as l3_weekly_reports,
        (select count(*) from insights where valid_to is null) as l3_insights,
        (select count(*) from asset_chunks) as asset_chunks,
        (select count(*) from quarantine) as quarantined,
        (select count(*) from llm_calls) as llm_calls
    """
)
SELECT_CHINESE_SUBJECT = text(
    """
    select m.namespace, m.subject_id, count(distinct i.item_id) as count_items
    from conversation_messages m
    join memory_items i on i.namespace = m.namespace and i.subject_id = m.subject_id and i.status = 'active'
    where m.lang = 'zh'
    group by m.namespace, m.subject_id
    order by count_items desc, m.namespace, m.subject_id
    limit 1
    """
)
SELECT_ANY_SUBJECT = text(
    """
    select namespace, subject_id from memory_items where status = 'active'
    group by namespace, subject_id order by count(*) desc, namespace, subject_id limit 1
    """
)
SELECT_REPORT = text(
    """
    select namespace, subject_id, week_start, summary
    from weekly_reports
    where namespace = :namespace and subject_id = :subject_id
    order by week_start desc
    limit 1
    """
)
SELECT_ANY_REPORT = text(
    "select namespace, subject_id, week_start, summary from weekly_reports order by week_start desc limit 1"
)
SELECT_NAMESPACE = text(
    "select namespace from message_keys group by namespace order by count(*) desc limit 1"
)


def progress(step: int, total: int, message: str, started: float) -> None:
    print(f"[{step}/{total} {time.monotonic() - started:5.0f}s] {message}", file=sys.stderr, flush=True)


def prepare_sample(
    settings: Settings, out: Path, subjects: int = SAMPLE_SUBJECTS, weeks: int = SAMPLE_WEEKS
) -> dict[str, str]:
    """Generate the sample into out once; later runs reuse it (the marker keeps its date range)."""
    marker = out / MARKER
    if marker.exists():
        kept: dict[str, str] = json.loads(marker.read_text())
        return kept
    try:
        from strataflow.demo import sample
    except ImportError:
        raise UserError(
            "the demo needs the sample generator (strataflow/demo/sample.py), which is not in this checkout"
        ) from None
    end = datetime.now(settings.tz).date() - timedelta(days=1)
    sample.write_sample(out, subjects=subjects, weeks=weeks, end_date=end, tz=settings.tz)
    info = {"start": sample.first_day(end, weeks).isoformat(), "end": end.isoformat()}
    marker.write_text(json.dumps(info))
    return info


def run_flows(settings: Settings, out: Path, info: dict[str, str], step: Any) -> list[RunSummary]:
    """The backfill over the sample, then the assets flow, through Prefect; a failed run stops the demo."""
    from models.params import AssetsParams, BackfillParams
    from strataflow.ops.flow_runner import run_flow

    step("backfill flow over the sample (Prefect starts a temporary API; the model loads once)")
    params = BackfillParams(
        start=date.fromisoformat(info["start"]), end=date.fromisoformat(info["end"]), paths=[str(out)]
    )
    summaries = [run_flow(settings, "backfill", params)]
    namespace = _demo_namespace(settings)
    step(f"assets flow over {out / 'assets'} (namespace {namespace})")
    summaries.append(
        run_flow(settings, "assets", AssetsParams(paths=[str(out / "assets")], namespace=namespace))
    )
    return summaries


def _demo_namespace(settings: Settings) -> str:
    from strataflow.db.engine import engine_for

    with engine_for(settings).connect() as conn:
        return conn.execute(SELECT_NAMESPACE).scalar() or "demo"


def describe(conn: Connection, settings: Settings, summaries: list[RunSummary]) -> str:
    """The text the demo prints: layers, a Chinese profile, a report excerpt, a context block, next steps."""
    from strataflow.memory.user_memory import summarize
    from strataflow.retrieval.context import build_context

    layers = conn.execute(COUNT_LAYERS).mappings().one()
    lines = ["", "== strataflow demo: what the pipeline wrote", ""]
    for summary in summaries:
        c = summary.counts
        lines.append(
            f"{summary.flow} run {summary.run_id} ({summary.status}): {c.rows_inserted} L1 rows inserted,"
            f" {c.llm_calls} LLM calls, {c.l2_new} new L2 items, {c.weekly_reports_written} weekly reports,"
            f" {c.assets_ingested} assets"
        )
    lines += ["", "Rows per layer:"]
    lines += [f"  {name:20} {value}" for name, value in layers.items()]
    subject = conn.execute(SELECT_CHINESE_SUBJECT).first() or conn.execute(SELECT_ANY_SUBJECT).first()
    if subject is None:
        raise UserError("the backfill wrote no L2 items: see the flow log above")
    namespace, subject_id = subject.namespace, subject.subject_id
    profile = summarize(conn, namespace, subject_id)
    lines += ["", f"Client profile {namespace}/{subject_id} (completeness {profile.completeness.score}%):"]
    for section in ("basic", "career", "immigration", "family"):
        values = getattr(profile.user_profile, section)
        shown = ", ".join(f"{key}={value}" for key, value in values.items()) or "-"
        lines.append(f"  {section:12} {shown}")
    lines.append(f"  narrative    {profile.narrative_summary}")
    report = conn.execute(SELECT_REPORT, {"namespace": namespace, "subject_id": subject_id}).first()
    report = report or conn.execute(SELECT_ANY_REPORT).first()
    if report is not None:
        excerpt = report.summary.strip()[:600]
        lines += [
            "",
            f"Weekly report {report.namespace}/{report.subject_id}, week of {report.week_start}:",
            excerpt,
        ]
    context = build_context(conn, settings, namespace, subject_id, DEMO_QUESTION, budget_tokens=400)
    lines += ["", f"Context block for {DEMO_QUESTION!r} ({context.tokens} tokens):", context.text]
    lines += ["", _report_line(conn, settings), "", _next_steps()]
    return "\n".join(lines)


def _report_line(conn: Connection, settings: Settings) -> str:
    try:
        from strataflow.ops.report import write_report
    except ImportError:
        return "HTML report: not in this checkout (strataflow/ops/report.py is missing)."
    result = write_report(conn, settings, settings.home / "demo-report.html")
    return f"HTML report: {result.path} (open it in a browser; `strataflow report` writes a fresh one)."


def _next_steps() -> str:
    return (
        "Next: `strataflow serve` starts the Prefect UI at http://127.0.0.1:4200 with the nightly, weekly,\n"
        "assets and backfill deployments (start a backfill from its form); `strataflow status` shows\n"
        "watermarks and runs; "
        '`psql "$(strataflow db url)"` opens the tables.'
    )


def run_demo(
    settings: Settings,
    out: Path | None = None,
    subjects: int = SAMPLE_SUBJECTS,
    weeks: int = SAMPLE_WEEKS,
    before_flows: Any = None,
) -> str:
    """Run the tour and return what to print (before_flows(info): called once the sample is ready, e.g. to
    print a time estimate)."""
    from strataflow.db import migrations
    from strataflow.db.engine import check_connection, engine_for

    started = time.monotonic()
    total = 5
    counter = iter(range(1, total + 1))

    def step(message: str) -> None:
        progress(next(counter), total, message, started)

    step(f"embedded database under {settings.home} (schema upgrade)")
    check_connection(settings)
    migrations.upgrade(engine_for(settings))
    out = (out or settings.home / "demo").expanduser().resolve()
    step(f"bilingual sample in {out}")
    out.mkdir(parents=True, exist_ok=True)
    info = prepare_sample(settings, out, subjects, weeks)
    if before_flows is not None:
        before_flows(info)
    summaries = run_flows(settings, out, info, step)
    step("reading back the layers")
    with engine_for(settings).connect() as conn:
        text_out = describe(conn, settings, summaries)
    print(f"demo finished in {time.monotonic() - started:.0f} s", file=sys.stderr)
    return text_out
