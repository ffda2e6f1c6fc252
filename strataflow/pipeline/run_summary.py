"""Closing a run: its figures read back from the ledger tables, the stage results merged, the final state by
the recorder's policy (strataflow/pipeline/runs.py), the summary a flow publishes.

A flow opens its run with tasks/bookkeeping.py's begin-run (runs.start_run, linked to the Prefect flow run),
passes the run id to every stage (so the LLM ledger, L2 versions and reports carry it), and closes it with
finish-run, which calls `close_run` here and publishes `summary_markdown` and `counts_table` as artifacts.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import date
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Engine, text

from models.params import BackfillPlan, RunCounts, RunSummary, Shard
from strataflow.config import Settings
from strataflow.pipeline import runs

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


def close_run(
    engine: Engine,
    flow: str,
    run_id: uuid.UUID,
    stages: dict[str, list[Any]],
    *,
    prefect_flow_run_id: str | None = None,
    days: int = 0,
    weeks: int = 0,
    run_date: date | None = None,
    plan: BackfillPlan | None = None,
) -> RunSummary:
    """Close the pipeline run with its counts and final state (a dry run's plan among them)."""
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
        prefect_flow_run_id=prefect_flow_run_id,
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
    by_namespace = runs.namespace_counts(everything)
    runs.finish_run(
        engine, run_id, status, {**counts.model_dump(), **extra}, "; ".join(errors) or None, by_namespace
    )
    if errors:
        runs.stage_logger(__name__).warning("%s run ended %s: %s", flow, status, "; ".join(errors))
    return summary
