"""`strataflow report`: one static HTML page (offline: inline SVG drawn here, nothing from the web)
with five plots and the key tables from the analyst views.

Plots on event time (when it was said), one point per ISO week (data-x is the week's Monday, in
STRATAFLOW_TIMEZONE): L1 messages per week by namespace, L2 memory items by kind (a running total by the
weeks their values became true), LLM tokens and cost per week (by the event time of the work each request
was about, from the view llm_cost_events). After a backfill of past weeks they show those weeks, not the
day the backfill ran. The quarantine rate and the expiry volume are events of the pipeline itself: per day of
processing time. Each data point is an SVG <circle class="point"> with data-series/data-x/data-y attributes;
a small inline script marks <body data-plots-drawn="N"> once the browser has laid the plots out (the
headless-Chromium test reads it).
"""

from __future__ import annotations

import html
import json
import math
import os
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Connection, text

from strataflow.config import Settings
from strataflow.timeutil import local_day_sql, week_start_sql

NS_FILTER = "(cast(:namespace as text) is null or {col} = :namespace)"
SELECT_MESSAGES_WEEKLY = text(
    f"""
    select {week_start_sql("mk.event_at", None)} as day, mk.namespace as series, count(*)::float as value
    from message_keys as mk
    where mk.event_at >= :since and {NS_FILTER.format(col="mk.namespace")}
    group by 1, 2 order by 1, 2
    """
)
SELECT_ITEMS_BY_KIND = text(
    f"""
    with changes as (
        select {week_start_sql("coalesce(v.valid_from, v.recorded_at)", None)} as day, v.kind,
            count(*) filter (where v.action = 'new') - count(*) filter (where v.action = 'deleted') as net
        from memory_item_versions as v
        where v.kind <> 'hot_summary' and {NS_FILTER.format(col="v.namespace")}
        group by 1, 2
    ),
    running as (
        select c.day, c.kind, sum(c.net) over (partition by c.kind order by c.day) as total from changes as c
    )
    select r.day, r.kind as series, r.total::float as value
    from running as r where r.day >= {week_start_sql("cast(:since as timestamptz)", None)}
    order by 1, 2
    """
)
SELECT_LLM_WEEKLY = text(
    f"""
    select cast(date_trunc('week', e.event_day) as date) as day,
        sum(e.total_tokens)::float as tokens,
        coalesce(sum(e.cost_usd), 0)::float as cost_usd
    from llm_cost_events as e
    where e.event_day >= cast(:since as date) and {NS_FILTER.format(col="e.namespace")}
    group by 1 order by 1
    """
)
SELECT_QUARANTINE_RATE = text(
    f"""
    with ingested as (
        select {local_day_sql("mk.first_ingested_at", None)} as day, count(*) as n from message_keys as mk
        where mk.first_ingested_at >= :since and {NS_FILTER.format(col="mk.namespace")} group by 1
    ),
    quarantined as (
        select {local_day_sql("q.created_at", None)} as day, count(*) as n from quarantine as q
        where q.created_at >= :since and {NS_FILTER.format(col="q.namespace")} group by 1
    )
    select coalesce(i.day, q.day) as day,
        100.0 * coalesce(q.n, 0) / nullif(coalesce(i.n, 0) + coalesce(q.n, 0), 0) as value
    from ingested as i full join quarantined as q on q.day = i.day
    order by 1
    """
)
SELECT_EXPIRY_DAILY = text(
    f"""
    select {local_day_sql("mk.expired_at", None)} as day, count(*)::float as value
    from message_keys as mk
    where mk.expired_at >= :since and {NS_FILTER.format(col="mk.namespace")}
    group by 1 order by 1
    """
)
TABLES: dict[str, tuple[str, str]] = {
    "Memory items by kind (memories)": (
        "namespace",
        "select namespace, kind, count(*) as count_items, count(*) filter (where is_manual) as count_manual, "
        "round(avg(importance)) as avg_importance from memories where {f} group by 1, 2 order by 1, 2",
    ),
    "Latest weekly reports (weekly_report_summaries)": (
        "namespace",
        "select namespace, subject_id, week_start, count_key_events, count_source_messages, "
        "left(summary, 160) "
        "as summary from weekly_report_summaries where {f} order by week_start desc, namespace, subject_id "
        "limit 12",
    ),
    "Current insights (current_insights)": (
        "namespace",
        "select namespace, subject_id, key, statement, confidence from current_insights where {f} "
        "order by confidence desc, namespace limit 12",
    ),
    "Pipeline health (pipeline_health)": (
        "namespace",
        "select namespace, day, flow, count_runs, count_failed, count_budget_stopped, count_quarantined, "
        "quarantine_by_reason from pipeline_health where {f} order by day desc, namespace, flow limit 15",
    ),
    "LLM cost per day (llm_cost_daily)": (
        "namespace",
        "select namespace, day, stage, model, count_calls, total_tokens, cost_usd from llm_cost_daily "
        "where {f} order by day desc, namespace, stage limit 15",
    ),
    "Deletions (deletions)": (
        "namespace",
        "select namespace, kind, dry_run, count_rows_deleted, count_partitions_dropped, deleted_at "
        "from deletions "
        "where {f} order by deleted_at desc limit 10",
    ),
    "Retention schedule (retention_schedule)": (
        "namespace",
        "select namespace, partition_name, count_messages, last_expires_at, count_not_rolled_up, is_due "
        "from retention_schedule where {f} order by last_expires_at limit 15",
    ),
}
EVERYTHING = datetime(1970, 1, 1, tzinfo=UTC)
PALETTE = ("#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563", "#65a30d")
WIDTH, HEIGHT, PAD_L, PAD_R, PAD_T, PAD_B = 600, 260, 56, 16, 28, 40

Series = dict[str, list[tuple[date, float]]]


class ReportResult(BaseModel):
    path: Path
    count_plots: int
    count_points: int
    count_tables: int


class Plot(BaseModel):
    title: str
    y_label: str
    series: dict[str, list[tuple[date, float]]]


def collect_plots(conn: Connection, namespace: str | None, since: datetime) -> list[Plot]:
    """The six plots' series (weekly on event time; quarantine and expiry daily on processing time)."""
    params = {"namespace": namespace, "since": since}

    def grouped(statement: Any) -> Series:
        series: Series = defaultdict(list)
        for row in conn.execute(statement, params):
            series[str(row.series)].append((row.day, float(row.value)))
        return dict(series)

    llm = conn.execute(SELECT_LLM_WEEKLY, params).all()
    quarantine = conn.execute(SELECT_QUARANTINE_RATE, params).all()
    expiry = conn.execute(SELECT_EXPIRY_DAILY, params).all()
    return [
        Plot(
            title="Messages per event week by namespace",
            y_label="messages",
            series=grouped(SELECT_MESSAGES_WEEKLY),
        ),
        Plot(
            title="Memory items by kind over event weeks",
            y_label="active items",
            series=grouped(SELECT_ITEMS_BY_KIND),
        ),
        Plot(
            title="LLM tokens per event week",
            y_label="tokens",
            series={"tokens": [(r.day, r.tokens) for r in llm]},
        ),
        Plot(
            title="LLM cost per event week",
            y_label="USD",
            series={"cost_usd": [(r.day, r.cost_usd) for r in llm]},
        ),
        Plot(
            title="Quarantine rate per day (processing time)",
            y_label="% of records",
            series={"quarantined %": [(r.day, float(r.value or 0)) for r in quarantine]},
        ),
        Plot(
            title="Expiry volume per day (processing time)",
            y_label="messages expired",
            series={"expired": [(r.day, r.value) for r in expiry]},
        ),  # fmt: skip
    ]


def collect_tables(
    conn: Connection, namespace: str | None
) -> dict[str, tuple[list[str], list[Sequence[Any]]]]:
    """Each key table as (columns, rows)."""
    tables: dict[str, tuple[list[str], list[Sequence[Any]]]] = {}
    for title, (column, sql) in TABLES.items():
        result = conn.execute(text(sql.format(f=NS_FILTER.format(col=column))), {"namespace": namespace})
        columns = [str(key) for key in result.keys()]
        rows: list[Sequence[Any]] = [_subject_by_hash(columns, tuple(row)) for row in result]
        tables[title] = ([SUBJECT_HEADER if c == "subject_id" else c for c in columns], rows)
    return tables


SUBJECT_HEADER = "subject (sha256)"


def _subject_by_hash(columns: list[str], row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A report names a subject by the hash `strataflow forget` reports (scope_ref), never by its id: a
    page written before a forget keeps no subject id."""
    from strataflow.pipeline.runs import scope_ref

    if "subject_id" not in columns:
        return row
    at, ns = columns.index("subject_id"), columns.index("namespace") if "namespace" in columns else None
    values = list(row)
    if values[at] is not None:
        values[at] = scope_ref(str(values[ns]) if ns is not None else "", str(values[at])).split("/", 1)[-1]
    return tuple(values)


def write_report(
    conn: Connection, settings: Settings, out: Path, namespace: str | None = None, days: int | None = None
) -> ReportResult:
    """Collect, render and write the page (days: only the last N days of event time; None: all of it);
    returns where and how much."""
    now = datetime.now(settings.tz)
    since = now - timedelta(days=days) if days else EVERYTHING
    plots = collect_plots(conn, namespace, since)
    tables = collect_tables(conn, namespace)
    page = render_page(plots, tables, namespace, now)
    out.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # the page holds memory text: private
    with os.fdopen(fd, "w", encoding="utf-8") as page_file:
        os.fchmod(page_file.fileno(), 0o600)
        page_file.write(page)
    points = sum(len(points) for plot in plots for points in plot.series.values())
    return ReportResult(path=out, count_plots=len(plots), count_points=points, count_tables=len(tables))


def render_page(
    plots: list[Plot],
    tables: dict[str, tuple[list[str], list[Sequence[Any]]]],
    namespace: str | None,
    now: datetime,
) -> str:
    scope = f"namespace {html.escape(namespace)}" if namespace else "all namespaces"
    figures = "\n".join(f'<figure class="card">{svg_line_chart(plot)}</figure>' for plot in plots)
    sections = "\n".join(_table_html(title, columns, rows) for title, (columns, rows) in tables.items())
    return PAGE.format(
        scope=scope,
        generated=html.escape(now.strftime("%Y-%m-%d %H:%M %Z")),
        figures=figures,
        tables=sections,
    )


def svg_line_chart(plot: Plot) -> str:
    """A line chart with a marker per data point, axes, ticks and a legend, as one inline <svg>."""
    title = html.escape(plot.title)
    points = [p for values in plot.series.values() for p in values]
    head = (
        f'<svg class="plot" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" '
        f'width="{WIDTH}" '
        f'height="{HEIGHT}" role="img" aria-label="{title}" data-title="{title}">'
        f'<text x="{PAD_L}" y="18" class="title">{title}</text>'
    )
    if not points:
        return head + f'<text x="{WIDTH / 2}" y="{HEIGHT / 2}" class="empty">no data yet</text></svg>'
    first, last = min(d for d, _ in points), max(d for d, _ in points)
    span = max((last - first).days, 1)
    top = nice_ceiling(max(v for _, v in points) * 1.1)  # headroom above the highest point
    inner_w, inner_h = WIDTH - PAD_L - PAD_R, HEIGHT - PAD_T - PAD_B

    def x_of(day: date) -> float:
        return PAD_L + inner_w * ((day - first).days / span if first != last else 0.5)

    def y_of(value: float) -> float:
        return PAD_T + inner_h * (1 - value / top)

    parts = [head, _axes(first, last, top, plot.y_label, x_of, y_of)]
    for index, (name, values) in enumerate(sorted(plot.series.items())):
        color = PALETTE[index % len(PALETTE)]
        values = sorted(values)
        path = " ".join(f"{x_of(d):.1f},{y_of(v):.1f}" for d, v in values)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{path}"/>')
        for day, value in values:
            parts.append(
                f'<circle class="point" cx="{x_of(day):.1f}" cy="{y_of(value):.1f}" r="3" fill="{color}" '
                f'data-series="{html.escape(name)}" data-x="{day.isoformat()}" data-y="{value:g}">'
                f"<title>{html.escape(name)} {day.isoformat()}: {value:g}</title></circle>"
            )
        legend_y = PAD_T + 4 + 14 * index
        parts.append(
            f'<rect x="{WIDTH - 150}" y="{legend_y}" width="10" height="10" fill="{color}"/>'
            f'<text x="{WIDTH - 135}" y="{legend_y + 9}" class="legend">{html.escape(name[:22])}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 x 10^n at or above value (1 for nothing to show)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for step in (1, 2, 2.5, 5, 10):
        if step * power >= value:
            return step * power
    return 10 * power


def format_number(value: float) -> str:
    """Short axis labels: 1.2M, 35k, 0.25."""
    for size, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.3g}"


def _axes(first: date, last: date, top: float, y_label: str, x_of: Any, y_of: Any) -> str:
    bottom, left = HEIGHT - PAD_B, PAD_L
    middle = (PAD_T + bottom) / 2
    parts = [
        f'<line x1="{left}" y1="{PAD_T}" x2="{left}" y2="{bottom}" class="axis"/>',
        f'<line x1="{left}" y1="{bottom}" x2="{WIDTH - PAD_R}" y2="{bottom}" class="axis"/>',
        f'<text x="14" y="{middle}" class="ylabel" transform="rotate(-90 14 {middle})">'
        f"{html.escape(y_label)}</text>",
    ]
    for fraction in (0, 0.5, 1):
        value = top * fraction
        label = format_number(value)
        parts.append(
            f'<text x="{left - 6}" y="{y_of(value) + 4:.1f}" class="tick" text-anchor="end">{label}</text>'
        )
        parts.append(f'<line x1="{left}" y1="{y_of(value):.1f}" x2="{WIDTH - PAD_R}" y2="{y_of(value):.1f}" '
                     'class="grid"/>')  # fmt: skip
    days = sorted({first, last, first + (last - first) / 2})
    for day in days:
        anchor = (
            "start"
            if day == first and len(days) > 1
            else "end"
            if day == last and len(days) > 1
            else "middle"
        )
        parts.append(f'<text x="{x_of(day):.1f}" y="{bottom + 16}" class="tick" text-anchor="{anchor}">'
                     f"{day.isoformat()}</text>")  # fmt: skip
    return "".join(parts)


def _table_html(title: str, columns: list[str], rows: list[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>" for row in rows
    )
    if not rows:
        body = f'<tr><td colspan="{len(columns)}" class="empty">no rows</td></tr>'
    return (
        f'<section class="card"><h2>{html.escape(title)}</h2><table><tr>{head}</tr>{body}</table></section>'
    )


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, default=str)
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    return str(value)


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>strataflow report</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 24px; color: #111827; background: #f9fafb; }}
h1 {{ font-size: 22px; }} h2 {{ font-size: 15px; margin: 0 0 8px; }}
.grid-plots {{ display: flex; flex-wrap: wrap; gap: 16px; }}
figure {{ margin: 0; }}
.card {{ background: #fff; border: 1px solid #e5e7eb; border-radius: 8px; padding: 12px; margin: 0 0 16px; }}
svg .title {{ font-size: 14px; font-weight: 600; }} svg .tick, svg .legend, svg .ylabel {{ font-size: 11px; }}
svg .axis {{ stroke: #6b7280; }} svg .grid {{ stroke: #e5e7eb; }} svg .empty {{ fill: #9ca3af; }}
table {{ border-collapse: collapse; font-size: 12px; }} td, th {{ border: 1px solid #e5e7eb; padding: 3px 6px;
  text-align: left; vertical-align: top; max-width: 420px; }} th {{ background: #f3f4f6; }}
</style></head>
<body data-plots-drawn="0">
<h1>strataflow memory report</h1>
<p>Scope: {scope}. Generated {generated}. Source: the analyst views (see the analyst guide).</p>
<div class="grid-plots">
{figures}
</div>
{tables}
<script>
document.addEventListener("DOMContentLoaded", function () {{
  var drawn = 0;
  document.querySelectorAll("svg.plot").forEach(function (svg) {{
    if (svg.querySelectorAll("circle.point").length > 0 && svg.getBBox().width > 0) {{ drawn += 1; }}
  }});
  document.body.setAttribute("data-plots-drawn", String(drawn));
}});
</script>
</body></html>
"""
