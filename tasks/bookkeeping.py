"""Run bookkeeping for the flows: the pipeline_runs row, the LLM concurrency limit, plans, counts, artifacts.

A flow opens its run with `begin_run` (a pipeline_runs row linked to the Prefect flow run id, through the
run recorder strataflow/ops/runs.py), passes the run id to every stage (so the LLM ledger, L2 versions and
reports carry it), and closes it with `finish_run`, which reads the run's figures back from the ledger
tables, sets the final state by the recorder's policy (completed, completed_with_errors, budget_stopped)
and publishes the artifacts. A stage that raises fails the flow run; the `mark_run_failed` hook then closes
the row as failed with the error.

The logical date of a run (`logical_date`): the nightly for day D reads D's files from the inbox and stamps
D on its record and summary. Unset, D is the day before the run's scheduled start in STRATAFLOW_TIMEZONE
(the day that just ended), as a scheduler's logical date is.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from pydantic import BaseModel
from sqlalchemy import text

from models.params import BackfillPlan, DayPlan, RunCounts, RunSummary, Shard
from strataflow.config import Settings
from strataflow.db.engine import engine_for
from strataflow.ingest.readers import expand_paths
from strataflow.ops import alerts, runs

LLM_LIMIT = "llm"
DATE_IN_NAME = re.compile(r"(\d{4})-?(\d{2})-?(\d{2})")

SELECT_RUN_FIGURES = text(
    """
    select
        (select count(*) from llm_calls where run_id = :run_id) as llm_calls,
        (select coalesce(sum(prompt_tokens + completion_tokens), 0) from llm_calls where run_id = :run_id)
            as llm_tokens,
        (select coalesce(sum(cost_usd), 0) from llm_calls where run_id = :run_id) as llm_cost_usd,
        (select count(*) from memory_item_versions
            where run_id = :run_id and action = 'new' and kind <> 'hot_summary') as l2_new,
        (select count(*) from memory_item_versions
            where run_id = :run_id and action <> 'new' and kind <> 'hot_summary') as l2_changed,
        (select count(*) from memory_item_versions where run_id = :run_id and kind = 'hot_summary')
            as hot_summaries,
        (select count(*) from weekly_reports where run_id = :run_id) as weekly_reports_written,
        (select count(*) from insights where run_id = :run_id) as insights_written,
        (select count(*) from asset_documents where run_id = :run_id) as assets_ingested
    """
)

# Result-model fields that feed the published counts, per stage (the fields present are summed).
STAGE_FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    "ingest": {
        "rows_read": ("read",),
        "rows_inserted": ("inserted",),
        "rows_updated": ("updated",),
        "rows_quarantined": ("quarantined",),
    },
    "embed": {
        "rows_embedded": (
            "conversation_messages",
            "memory_items",
            "weekly_reports",
            "insights",
            "asset_chunks",
        ),
        "encodes": ("encoded",),
    },
    "expire": {"rows_expired": ("removed_rows",)},
}


# --- plain functions ---------------------------------------------------------------------------------


def today(settings: Settings) -> date:
    """Today in STRATAFLOW_TIMEZONE."""
    return datetime.now(settings.tz).date()


def inbox_dir(settings: Settings) -> Path:
    return settings.inbox_dir or settings.home / "inbox"


def logical_date(settings: Settings, run_date: date | None) -> date:
    """The day a run stands for: run_date, else the day before the run's scheduled start (in the zone)."""
    if run_date is not None:
        return run_date
    from prefect.runtime import flow_run

    started: datetime = flow_run.scheduled_start_time  # outside a flow run: now
    return started.astimezone(settings.tz).date() - timedelta(days=1)


def log_paths(settings: Settings, paths: list[str], day: date | None = None) -> list[str]:
    """The paths to ingest: the given ones as they are; else the inbox (created when missing), with `day`
    only its files dated `day` and the undated ones (a file dated another day waits for its own night)."""
    if paths:
        return list(paths)
    inbox = inbox_dir(settings)
    inbox.mkdir(parents=True, exist_ok=True)
    if day is None:
        return [str(inbox)]
    return [str(file) for file in expand_paths([str(inbox)]) if date_in_name(file) in (day, None)]


def asset_paths(settings: Settings, paths: list[str]) -> list[str]:
    """The asset paths to ingest: the given ones, or STRATAFLOW_HOME/assets."""
    if paths:
        return list(paths)
    folder = settings.home / "assets"
    folder.mkdir(parents=True, exist_ok=True)
    return [str(folder)]


def date_in_name(path: Path) -> date | None:
    """The date a file name holds (2024-03-05 or 20240305), or None."""
    match = DATE_IN_NAME.search(path.name)
    if match is None:
        return None
    try:
        return date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return None


def plan_days(paths: list[str], start: date, end: date) -> list[DayPlan]:
    """Backfill days in order: a dated file goes to its day (outside [start, end]: left out); undated files go
    to the first day. Only days with files are listed; with no files at all, the first day (embed/extract
    still run over anything ingested earlier)."""
    by_day: dict[date, list[str]] = {}
    for file in expand_paths(paths):
        day = date_in_name(file) or start
        if start <= day <= end:
            by_day.setdefault(day, []).append(str(file))
    if not by_day:
        return [DayPlan(day=start, paths=[])]
    return [DayPlan(day=day, paths=by_day[day]) for day in sorted(by_day)]


def plan_weeks(start: date, end: date, today_: date) -> list[date]:
    """Mondays of the ISO weeks touching [start, end] that are complete (their Sunday is before today)."""
    monday = start - timedelta(days=start.weekday())
    weeks = []
    while monday <= end:
        if monday + timedelta(days=6) < today_:
            weeks.append(monday)
        monday += timedelta(days=7)
    return weeks


def _as_dict(result: Any) -> dict[str, Any]:
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json")
    if isinstance(result, Mapping):
        return dict(result)
    return {"value": result}


def merge_results(results: list[Any]) -> dict[str, Any]:
    """Results of one stage (backfill days) as one: numbers summed, flags or-ed, the rest last wins."""
    merged: dict[str, Any] = {}
    for result in results:
        for key, value in _as_dict(result).items():
            old = merged.get(key)
            if isinstance(value, bool) or isinstance(old, bool):
                merged[key] = bool(old) or bool(value)
            elif isinstance(value, int | float) and isinstance(old, int | float):
                merged[key] = old + value
            else:
                merged[key] = value
    return merged


def count_run(engine_figures: Mapping[str, Any], stages: Mapping[str, dict[str, Any]]) -> RunCounts:
    """The published counts: LLM, L2, L3 and asset figures from the ledger tables; rows from stage results."""
    figures: dict[str, Any] = {key: engine_figures[key] for key in engine_figures}
    figures["llm_cost_usd"] = float(figures.get("llm_cost_usd") or 0)
    for stage, fields in STAGE_FIELDS.items():
        result = stages.get(stage, {})
        for count, candidates in fields.items():
            figures[count] = sum(int(result[name]) for name in candidates if name in result)
    figures["units_failed"] = sum(int(result.get("units_failed") or 0) for result in stages.values())
    figures["budget_stopped"] = any(bool(result.get("budget_stopped")) for result in stages.values())
    return RunCounts(**figures)


def summary_markdown(summary: RunSummary) -> str:
    counts = summary.counts
    day = f" for {summary.run_date}" if summary.run_date else ""
    lines = [
        f"# {summary.flow} run `{summary.run_id}`{day}: {summary.status}",
        "",
        f"- L1: {counts.rows_read} rows read, {counts.rows_inserted} inserted, {counts.rows_updated} updated,"
        f" {counts.rows_quarantined} quarantined; {counts.rows_embedded} rows embedded"
        f" ({counts.encodes} encodes)",
        f"- LLM: {counts.llm_calls} calls, {counts.llm_tokens} tokens, ${counts.llm_cost_usd:.4f}"
        + (" (stopped by the run budget; the next run resumes)" if counts.budget_stopped else ""),
        f"- L2: {counts.l2_new} new items, {counts.l2_changed} changed, {counts.hot_summaries} hot summaries",
        f"- L3: {counts.weekly_reports_written} weekly reports written, {counts.insights_written} insights",
        f"- Assets: {counts.assets_ingested} documents ingested",
        f"- Expiry: {counts.rows_expired} L1 rows removed",
    ]
    if summary.plan is not None:
        lines.append(f"- Backfill (dry run, nothing sent or written): {summary.plan.range_summary()}")
    elif summary.days or summary.weeks:
        lines.append(f"- Backfill: {summary.days} day(s), {summary.weeks} week(s)")
    if summary.errors:
        lines += ["", f"## {counts.units_failed} failed unit(s)", ""]
        lines += [f"- {error}" for error in summary.errors]
    return "\n".join(lines) + "\n"


def counts_table(counts: RunCounts) -> list[dict[str, Any]]:
    return [{"figure": key, "value": value} for key, value in counts.model_dump().items()]


def shards(settings: Settings) -> list[Shard]:
    """The parts an LLM stage fans out over: one per Dask worker with the Dask runner, else one (every
    scope). The parts split the scopes by a stable hash; the per-scope advisory locks of the stages keep a
    scope done once when two runs overlap."""
    count = settings.dask_workers if settings.task_runner == "dask" else 1
    return [Shard(index=index, count=count) for index in range(count)]


def fan_out(stage_task: Any, settings: Settings, name: str, **arguments: Any) -> list[Any]:
    """Submit stage_task(settings, shard=..., **arguments) once per shard (each its own task run, named
    name-1of2, ...) and wait for their results, in shard order."""
    futures = []
    for shard in shards(settings):
        part = stage_task.with_options(task_run_name=f"{name}-{shard.index + 1}of{shard.count}")
        futures.append(part.submit(settings, shard=shard, **arguments))
    return [future.result() for future in futures]


def ensure_llm_limit(limit: int) -> None:
    """Create the global concurrency limit `llm` on the current Prefect API when it does not exist yet."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    with get_client(sync_client=True) as client:
        try:
            client.read_global_concurrency_limit_by_name(LLM_LIMIT)
        except ObjectNotFound:
            try:
                client.create_global_concurrency_limit(
                    GlobalConcurrencyLimitCreate(name=LLM_LIMIT, limit=limit)
                )
            except ObjectAlreadyExists:  # another run created it meanwhile
                pass


@contextmanager
def llm_slot(settings: Settings) -> Iterator[None]:
    """Hold one slot of the Prefect global concurrency limit `llm` around an LLM stage."""
    from prefect.concurrency.sync import concurrency

    with concurrency(LLM_LIMIT, occupy=1, strict=settings.llm_limit_strict):
        yield


def mark_run_failed(flow: Any, flow_run: Any, state: Any) -> None:
    """Flow hook (failure or crash): close the run's pipeline_runs row as failed with the state's message."""
    from strataflow.config import load_settings

    runs.fail_flow_run(engine_for(load_settings()), flow_run.id, state.message or state.name)


# --- tasks -------------------------------------------------------------------------------------------


@task(name="begin-run", retries=2, retry_delay_seconds=[2, 10], cache_policy=NO_CACHE)
def begin_run(
    settings: Settings, flow: str, parameters: dict[str, Any], namespace: str | None = None
) -> uuid.UUID:
    """Record the pipeline run (linked to this Prefect flow run) and make sure the `llm` limit exists."""
    from prefect.runtime import flow_run

    if settings.llm_limit_strict:
        ensure_llm_limit(settings.llm_concurrency)
    return runs.start_run(engine_for(settings), flow, parameters, namespace, prefect_flow_run_id=flow_run.id)


@task(name="plan-backfill", cache_policy=NO_CACHE)
def plan_backfill(
    settings: Settings, paths: list[str], start: date, end: date
) -> tuple[list[DayPlan], list[date]]:
    """The days (with their files) and the complete ISO weeks a backfill will process, in event-time order."""
    return plan_days(log_paths(settings, paths), start, end), plan_weeks(start, end, today(settings))


@task(name="finish-run", retries=2, retry_delay_seconds=[2, 10], cache_policy=NO_CACHE)
def finish_run(
    settings: Settings,
    flow: str,
    run_id: uuid.UUID,
    stages: dict[str, list[Any]],
    days: int = 0,
    weeks: int = 0,
    run_date: date | None = None,
    plan: BackfillPlan | None = None,
) -> RunSummary:
    """Close the pipeline run with its counts and final state (a dry run's plan among them); publish the
    summary, table and counts artifacts."""
    from prefect.artifacts import create_markdown_artifact, create_table_artifact
    from prefect.runtime import flow_run

    engine = engine_for(settings)
    with engine.connect() as conn:
        figures = dict(conn.execute(SELECT_RUN_FIGURES, {"run_id": run_id}).mappings().one())
    merged = {stage: merge_results(results) for stage, results in stages.items() if results}
    counts = count_run(figures, merged)
    everything = [result for results in stages.values() for result in results]
    status = runs.run_status(everything)
    errors = runs.stage_errors(everything)
    summary = RunSummary(
        flow=flow,
        run_id=str(run_id),
        prefect_flow_run_id=str(flow_run.id) if flow_run.id else None,
        status=status,
        counts=counts,
        stages=merged,
        days=days,
        weeks=weeks,
        run_date=run_date,
        errors=errors,
        plan=plan,
    )
    extra: dict[str, Any] = {"days": days, "weeks": weeks}
    extra["run_date"] = run_date.isoformat() if run_date else None
    if plan is not None:
        extra["plan"] = plan.model_dump(mode="json")
    runs.finish_run(engine, run_id, status, {**counts.model_dump(), **extra}, "; ".join(errors) or None)
    if errors:
        runs.stage_logger(__name__).warning("%s run ended %s: %s", flow, status, "; ".join(errors))
    create_markdown_artifact(
        summary_markdown(summary), key=f"{flow}-summary", description=f"{flow} run summary"
    )
    create_table_artifact(counts_table(counts), key=f"{flow}-counts", description=f"{flow} run counts")
    alerts.emit_run_events(summary)  # strataflow.run.completed[_with_errors]: automations chain on them
    return summary
