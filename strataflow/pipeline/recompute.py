"""Backfills that recompute: the window a backfill with reprocess or force redoes, and the plan of a dry run.

`recompute_window`: the Recompute of a backfill (None unless reprocess or force): its days [start, end] as
event-time bounds in STRATAFLOW_TIMEZONE.

`plan_backfill_work`: what the LLM stages of a backfill would send, read with the functions the stages use
themselves (extract.scope_work, hot_memory.last_messages, rollup.week_records, reflect's pending items), so
the plan and the run batch alike. For each stage: the scopes, the requests (one per batch), their prompt
tokens counted with litellm.token_counter for the configured model, completion tokens estimated from the
stage's past calls (their completion share of the prompt in llm_calls; COMPLETION_SHARE when there are
none) and the cost from litellm's cost map (0 for the offline provider; None for a model the map does not
price). With reprocess the plan is the whole recompute of the window (what a new model will be sent);
`already_current` says how many of those requests the configured model and prompt version already answered
(a reprocess skips them, force sends them again). Reflection is planned for the items pending now; items a
reprocess changes will be reflected too. No model is called and nothing is written but the run's markdown
artifact `backfill-plan`.
"""

from __future__ import annotations

from datetime import date
from typing import Any

from sqlalchemy import Connection, text

from models.llm import ExtractionOutput
from models.params import (
    EVERY_SCOPE,
    BackfillParams,
    BackfillPlan,
    DayPlan,
    Recompute,
    Stage,
    StagePlan,
)
from strataflow.config import Settings
from strataflow.db.engine import engine_for
from strataflow.llm import lazy
from strataflow.llm.gateway import STAGE_MODEL_FIELD
from strataflow.llm.ledger import input_hash
from strataflow.llm.tokens import count_prompt_tokens
from strataflow.pipeline import extract, hot_memory, reflect, reflect_prompt, rollup, rollup_prompt, scopes
from strataflow.timeutil import day_bounds, week_bounds

COMPLETION_SHARE = 0.15  # completion tokens per prompt token when a stage has no past calls to learn from
PLAN_ARTIFACT = "backfill-plan"

SELECT_COMPLETION_SHARE = text(
    """
    select sum(completion_tokens)::float / nullif(sum(prompt_tokens), 0)
    from llm_calls where stage = :stage and outcome = 'ok'
    """
)
SELECT_CACHED = text(
    """
    select input_hash from llm_cache
    where stage = :stage and prompt_version = :prompt_version and model = :model
      and coalesce(namespace, '') = :namespace and input_hash = any(:hashes)
    """
)


def recompute_window(settings: Settings, params: BackfillParams) -> Recompute | None:
    """The event-time window a backfill recomputes: [start 00:00, end + 1 day 00:00) in the zone."""
    if not (params.reprocess or params.force):
        return None
    since, until = day_bounds(params.start, settings.tz)[0], day_bounds(params.end, settings.tz)[1]
    return Recompute(since=since, until=until, force=params.force)


class Counter:
    """Prompt tokens of one stage's planned requests, with litellm's token counter for its model."""

    def __init__(self, settings: Settings, stage: str, prompt_version: str, force: bool = False) -> None:
        self.force = force
        self.model = str(getattr(settings, STAGE_MODEL_FIELD[stage]))
        self.plan = StagePlan(model=self.model, prompt_version=prompt_version)
        self.scopes: set[tuple[str, str]] = set()
        self.litellm = lazy.litellm()

    def add(self, namespace: str, subject_id: str, prompt: list[dict[str, str]], current: bool) -> None:
        """One request of the work: counted as sent, or (already current, without force) apart as skipped."""
        self.scopes.add((namespace, subject_id))
        tokens = count_prompt_tokens(self.model, prompt)
        self.plan.already_current += current
        if current and not self.force:
            self.plan.already_current_prompt_tokens += tokens
            return
        self.plan.llm_calls += 1
        self.plan.prompt_tokens += tokens

    def finish(self, conn: Connection, stage: str, units: int) -> StagePlan:
        share = conn.execute(SELECT_COMPLETION_SHARE, {"stage": stage}).scalar()
        self.plan.scopes, self.plan.units = len(self.scopes), units
        self.plan.completion_tokens = round(self.plan.prompt_tokens * (share or COMPLETION_SHARE))
        self.plan.cost_usd = estimate_cost(self.litellm, self.model, self.plan)
        return self.plan


def estimate_cost(litellm: Any, model: str, plan: StagePlan) -> float | None:
    """USD from litellm's cost map; 0 for the offline provider, None when the map has no price."""
    if model.startswith("offline/"):
        return 0.0
    if model not in litellm.model_cost and model.split("/", 1)[-1] not in litellm.model_cost:
        return None
    prompt_usd, completion_usd = litellm.cost_per_token(
        model=model, prompt_tokens=plan.prompt_tokens, completion_tokens=plan.completion_tokens
    )
    return round(float(prompt_usd) + float(completion_usd), 6)


def plan_extract(
    conn: Connection, settings: Settings, namespace: str | None, window: Recompute | None
) -> StagePlan:
    """Extraction: the batches past the watermarks, then (recomputing) every batch of the window."""
    force = window is not None and window.force
    prompt = extract.extract_prompt(settings)
    counter = Counter(settings, "extract", prompt.version, force)
    units = 0
    for recompute in (None, window) if window is not None else (None,):
        for scope in extract.scopes_to_extract(conn, namespace, EVERY_SCOPE, recompute):
            batch_tokens = prompt.batch_tokens(settings)
            work = extract.scope_work(conn, scope, batch_tokens, counter.model, recompute, prompt.version)
            if not work.batches:
                continue
            units += 1
            keys = extract.existing_keys(conn, scope.namespace, scope.subject_id)
            cached = (
                set()
                if recompute is None or recompute.force
                else cached_batches(conn, counter, work, scope.namespace, prompt.schema)
            )
            for batch in work.batches:
                current = work.current or extract.batch_cache_key(batch) in cached
                counter.add(scope.namespace, scope.subject_id, prompt.messages(batch, keys), current)
    return counter.finish(conn, "extract", units)


def cached_batches(
    conn: Connection,
    counter: Counter,
    work: extract.ScopeWork,
    namespace: str,
    schema: type[ExtractionOutput] = ExtractionOutput,
) -> set[str]:
    """Cache keys of the work's batches that the configured model and prompt version (the counter's) already
    answered for the namespace (the cache is keyed by namespace)."""
    by_hash = {
        input_hash([], schema, extract.batch_cache_key(batch)): extract.batch_cache_key(batch)
        for batch in work.batches
    }
    params = {
        "stage": "extract", "prompt_version": counter.plan.prompt_version, "model": counter.model,
        "namespace": namespace,
    }  # fmt: skip
    found = conn.execute(SELECT_CACHED, {**params, "hashes": list(by_hash)}).scalars()
    return {by_hash[value] for value in found}


def plan_hot_memory(
    conn: Connection, settings: Settings, namespace: str | None, window: Recompute | None
) -> StagePlan:
    """Hot memory: one request per scope past its watermark, then (recomputing) per scope of the window."""
    force = window is not None and window.force
    counter = Counter(settings, "hot_summary", hot_memory.PROMPT_VERSION, force)
    pending = hot_memory.hot_scopes(conn, namespace, EVERY_SCOPE)
    seen = {(scope.namespace, scope.subject_id) for scope in pending}
    windowed = [] if window is None else hot_memory.hot_scopes(conn, namespace, EVERY_SCOPE, window)
    for scope in pending + [s for s in windowed if (s.namespace, s.subject_id) not in seen]:
        current = (scope.namespace, scope.subject_id) not in seen and (
            window is not None
            and not window.force
            and hot_memory.summary_is_current(conn, scope, counter.model)
        )
        prompt = hot_memory.hot_prompt(hot_memory.last_messages(conn, scope))
        counter.add(scope.namespace, scope.subject_id, prompt, current)
    return counter.finish(conn, "hot_summary", counter.plan.llm_calls)


def plan_rollup(
    conn: Connection, settings: Settings, namespace: str | None, weeks: list[date], window: Recompute | None
) -> StagePlan:
    """Rollup: per complete week of the range, the scope-weeks whose report is missing or stale, or
    (recomputing) every scope-week with live messages."""
    force = window is not None and window.force
    counter = Counter(settings, "rollup", rollup.PROMPT_VERSION, force)
    for monday in weeks:
        since, until = week_bounds(monday, settings.tz)
        for row in scopes.week_inputs(conn, settings.timezone, namespace, since, until, all_scopes=True):
            bounds = {"namespace": row.namespace, "subject_id": row.subject_id, "start": since, "end": until}
            existing = conn.execute(rollup.SELECT_REPORT, {**bounds, "week_start": row.week_start}).first()
            current = rollup.is_current(existing, row, counter.model, window)
            if row.live_count == 0 or (current and window is None):
                continue
            records = rollup_prompt.sample_for_prompt(
                rollup.week_records(conn, bounds, settings.tz), rollup_prompt.PROMPT_BUDGET_CHARS
            )
            prompt = rollup_prompt.build_prompt(row.namespace, row.subject_id, row.week_start, records)
            counter.add(row.namespace, row.subject_id, prompt, current)
    return counter.finish(conn, "rollup", counter.plan.llm_calls)


def plan_reflect(conn: Connection, settings: Settings, namespace: str | None) -> StagePlan:
    """Reflection: one request per BATCH_ITEMS pending items of each scope (as reflect_scope sends them)."""
    counter = Counter(settings, "reflect", reflect.PROMPT_VERSION)
    for scope in scopes.unreflected_scopes(conn, namespace, EVERY_SCOPE):
        params = {"namespace": scope.namespace, "subject_id": scope.subject_id}
        items = [
            item
            for item in conn.execute(reflect.SELECT_PENDING_ITEMS, params)
            if item.status == "active" and item.kind in reflect.REFLECTED_KINDS
        ]
        for offset in range(0, len(items), reflect.BATCH_ITEMS):
            prompt = reflect_prompt.build_prompt(items[offset : offset + reflect.BATCH_ITEMS])
            counter.add(scope.namespace, scope.subject_id, prompt, False)
    return counter.finish(conn, "reflect", len(counter.scopes))


def plan_backfill_work(
    settings: Settings, params: BackfillParams, days: list[DayPlan], weeks: list[date]
) -> BackfillPlan:
    """The plan of a backfill (see the module docstring); reads only."""
    window = recompute_window(settings, params)
    stages: dict[str, StagePlan] = {}
    with engine_for(settings).connect() as conn:  # reads only; the transaction is rolled back
        if Stage.extract in params.stages:
            stages["extract"] = plan_extract(conn, settings, params.namespace, window)
        if Stage.rollup in params.stages:
            stages["rollup"] = plan_rollup(conn, settings, params.namespace, weeks, window)
        if Stage.hot_memory in params.stages:
            stages["hot_memory"] = plan_hot_memory(conn, settings, params.namespace, window)
        if Stage.reflect in params.stages:
            stages["reflect"] = plan_reflect(conn, settings, params.namespace)
    costs = [plan.cost_usd for plan in stages.values()]
    return BackfillPlan(
        start=params.start,
        end=params.end,
        reprocess=window is not None,
        force=params.force,
        files_to_ingest=sum(len(day.paths) for day in days) if Stage.ingest in params.stages else 0,
        weeks=weeks if Stage.rollup in params.stages else [],
        stages=stages,
        llm_calls_planned=sum(plan.llm_calls for plan in stages.values()),
        llm_calls_already_current=sum(plan.already_current for plan in stages.values()),
        prompt_tokens_already_current=sum(plan.already_current_prompt_tokens for plan in stages.values()),
        prompt_tokens_estimated=sum(plan.prompt_tokens for plan in stages.values()),
        completion_tokens_estimated=sum(plan.completion_tokens for plan in stages.values()),
        cost_usd_estimated=None if None in costs else round(sum(c or 0.0 for c in costs), 6),
        unpriced_models=sorted({plan.model for plan in stages.values() if plan.cost_usd is None}),
    )


def plan_markdown(plan: BackfillPlan, budget_tokens: int) -> str:
    """The plan as the run's markdown artifact."""
    cost = "unknown" if plan.cost_usd_estimated is None else f"${plan.cost_usd_estimated:.4f}"
    mode = "pending work only"
    if plan.reprocess:
        mode = "reprocess (where another model or prompt version produced the rows)"
    if plan.force:
        mode = "force (everything in the range, with fresh answers)"
    current = (
        f"{plan.llm_calls_already_current} of them already answered by the configured model and prompt"
        " version: force sends them again"
        if plan.force
        else f"apart: {plan.llm_calls_already_current} already answered by the configured model and prompt"
        f" version, skipped and not counted ({plan.prompt_tokens_already_current} prompt tokens not sent)"
    )
    lines = [
        f"# Backfill plan {plan.start} to {plan.end}: {plan.days} day(s) (dry run: no model call, nothing"
        " written)",
        "",
        f"- Mode: {mode}",
        f"- Requests the run would send: {plan.llm_calls_planned} ({current})",
        f"- Prompt tokens the run would send (litellm.token_counter): {plan.prompt_tokens_estimated};"
        f" completion tokens (estimated): {plan.completion_tokens_estimated}",
        f"- Estimated cost (litellm's cost map): {cost}"
        + (f"; not priced: {', '.join(plan.unpriced_models)}" if plan.unpriced_models else ""),
        f"- Log files to ingest first: {plan.files_to_ingest} (their messages are not in the estimate)",
        f"- Complete weeks to roll up: {len(plan.weeks)}",
    ]
    total = plan.prompt_tokens_estimated + plan.completion_tokens_estimated
    if total > budget_tokens:
        lines.append(
            f"- **Over the run budget** ({total} > STRATAFLOW_LLM_BUDGET_TOKENS {budget_tokens}): the run"
            " will stop cleanly at the budget; run it again to resume"
        )
    lines += [
        "",
        "| stage | model | prompt version | scopes | requests sent | already current | prompt tokens sent |"
        " completion tokens | cost (USD) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, stage in plan.stages.items():
        usd = "n/a" if stage.cost_usd is None else f"{stage.cost_usd:.4f}"
        lines.append(
            f"| {name} | {stage.model} | {stage.prompt_version} | {stage.scopes} | {stage.llm_calls} |"
            f" {stage.already_current} | {stage.prompt_tokens} | {stage.completion_tokens} | {usd} |"
        )
    return "\n".join(lines) + "\n"
