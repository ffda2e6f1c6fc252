"""Weekly rollup: one L3 report per scope and ISO week (Monday to Sunday in STRATAFLOW_TIMEZONE).

A report's `input_hash` is the md5 of the week's message identities and content hashes, read from
message_keys (which outlive L1 expiry), so:
- a rerun over an unchanged week finds the same hash and writes nothing, with no LLM request;
- a late backfill (new or changed messages in an old week) changes the hash and the week is rolled again;
- expiry does not change the hash, and the expiry guard uses the same hash to know a week is covered.
A new prompt version or model re-rolls nothing by itself (like extraction); `--week-start` re-rolls a week
only when its input changed, and otherwise refreshes its metrics (SQL only). A backfill that recomputes
(models/params.py Recompute) also re-rolls the weeks whose report another model or prompt version wrote
(force: every week, with a fresh answer); the rewritten report keeps its earlier revision
(strataflow/memory/reports.py).

Long weeks are sampled to fit the prompt (strataflow/pipeline/rollup_prompt.py); metrics are always computed
in SQL over the whole week.

A week is normally rolled up before its rows expire (the expiry guard sees to it). If a late backfill
changes a week whose rows were partly expired, the new summary can only read the surviving rows; key
events of the old report whose messages all expired are carried over, and metrics count the expired
messages from message_keys (`messages_total`).

The report's embedding is left null (and reset when a report is rewritten): the embed stage fills it.

A report never repeats itself: a bullet of the summary that says what an earlier bullet said (the same text
but for case, spacing and end punctuation: a user who said the same sentence twice) is left out, and key
events with the same text are one event with the ids of both (distinct_bullets, distinct_events), whatever
model wrote them.

Each scope-week is read in one transaction, sent to the model with no transaction open, and written in a
new one, under a session advisory lock on the scope-week (two processes never roll one week at once; the
stored hash is read again under the lock). The scope-weeks fan out over Dask workers by shard (a stable
hash of the scope, models/params.py Shard): each task of the weekly flow takes its part. Failures follow
the LLM stage policy of models/results.py; retries live in the gateway only.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from datetime import date, datetime
from functools import partial
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import Connection, Engine, text

from models.lifecycle import RollupResult
from models.llm import RollupOutput
from models.params import EVERY_SCOPE, Recompute, Shard
from strataflow import telemetry
from strataflow.config import Settings
from strataflow.db.engine import engine_for
from strataflow.llm.gateway import LLMGateway
from strataflow.memory.reports import report_fts, write_reports
from strataflow.pipeline.rollup_prompt import (
    MESSAGE_CHARS,
    PROMPT_BUDGET_CHARS,
    PROMPT_VERSION,
    build_prompt,
    sample_for_prompt,
)
from strataflow.pipeline.runs import scope_ref, stage_logger
from strataflow.pipeline.scopes import Scope, scope_lock, scope_weeks
from strataflow.pipeline.stage_loop import run_units, stage_gateway
from strataflow.timeutil import local_day_sql, week_bounds, week_end

STAGE = "rollup"
SELECT_WEEK_MESSAGES = text(
    """
    select message_id, role, content, intent, event_at
    from conversation_messages
    where namespace = :namespace and subject_id = :subject_id and event_at >= :start and event_at < :end
    order by event_at, message_id
    """
)
SELECT_WEEK_MESSAGE_IDS = text(
    """
    select message_id from message_keys
    where namespace = :namespace and subject_id = :subject_id and event_at >= :start and event_at < :end
    order by message_id
    """
)
SELECT_REPORT = text(
    """
    select report_id, key_events, metrics, input_hash, model, prompt_version from weekly_reports
    where namespace = :namespace and subject_id = :subject_id and week_start = :week_start
    """
)
SELECT_METRICS = text(
    f"""
    with msgs as (
        select role, coalesce(intent, 'unknown') as intent, {local_day_sql("event_at")} as day
        from conversation_messages
        where namespace = :namespace and subject_id = :subject_id and event_at >= :start and event_at < :end
    ),
    item_changes as (
        select count(*) filter (where action = 'new') as created,
               count(*) filter (where action in ('content_modified', 'modified')) as changed,
               count(*) filter (where action = 'deleted') as deleted
        from memory_item_versions
        where namespace = :namespace and subject_id = :subject_id
          and valid_from >= :start and valid_from < :end
    ),
    spend as (
        select count(*) as calls, coalesce(sum(prompt_tokens), 0) as prompt_tokens,
               coalesce(sum(completion_tokens), 0) as completion_tokens,
               coalesce(sum(cost_usd), 0) as cost_usd
        from llm_calls
        where namespace = :namespace and subject_id = :subject_id
          and created_at >= :start and created_at < :end
    )
    select jsonb_build_object(
        'messages_total', (select count(*) from message_keys
                           where namespace = :namespace and subject_id = :subject_id
                             and event_at >= :start and event_at < :end),
        'messages_live', (select count(*) from msgs),
        'messages_by_role', (select coalesce(jsonb_object_agg(role, n), '{{}}'::jsonb)
                             from (select role, count(*) as n from msgs group by role) as r),
        'messages_by_intent', (select coalesce(jsonb_object_agg(intent, n), '{{}}'::jsonb)
                               from (select intent, count(*) as n from msgs group by intent) as i),
        'active_days', (select count(distinct day) from msgs),
        'items_created', c.created, 'items_changed', c.changed, 'items_deleted', c.deleted,
        'llm_calls', s.calls, 'llm_prompt_tokens', s.prompt_tokens,
        'llm_completion_tokens', s.completion_tokens, 'llm_cost_usd', s.cost_usd
    ) as metrics
    from item_changes as c cross join spend as s
    """
)
UPDATE_METRICS = text(
    """
    update weekly_reports set metrics = cast(:metrics as jsonb), updated_at = now()
    where report_id = :report_id
    """
)


@dataclass
class WeekWork:
    """What one scope-week's rollup read before its model call."""

    row: Any
    bounds: dict[str, Any]
    existing: Any
    metrics: dict[str, Any]
    live_ids: set[int]
    week_ids: list[int]
    prompt: list[dict[str, str]]


def is_current(existing: Any, row: Any, model: str, recompute: Recompute | None) -> bool:
    """True when the stored report needs no new model call: written from the same input and, when
    recomputing, by the configured model and prompt version (never under force)."""
    if existing is None or existing.input_hash != row.input_hash:
        return False
    if recompute is None:
        return True
    return not recompute.force and (existing.model, existing.prompt_version) == (model, PROMPT_VERSION)


def prepare_week(
    conn: Connection,
    settings: Settings,
    row: Any,
    result: RollupResult,
    model: str,
    recompute: Recompute | None = None,
) -> WeekWork | None:
    """Read one scope-week (row of week_inputs); None when it needs no model call (its report is current, so
    at most its metrics are refreshed, SQL only; or its messages all expired). The caller owns the
    transaction, which must end before the model is called."""
    tz = settings.tz
    start, end = week_bounds(row.week_start, tz)
    bounds = {"namespace": row.namespace, "subject_id": row.subject_id, "start": start, "end": end}
    existing = conn.execute(SELECT_REPORT, {**bounds, "week_start": row.week_start}).first()
    metrics = conn.execute(SELECT_METRICS, {**bounds, "tz": settings.timezone}).scalar_one()
    if existing is not None and is_current(existing, row, model, recompute):  # read under the lock
        if existing.metrics == metrics:
            result.unchanged += 1
        else:
            conn.execute(UPDATE_METRICS, {"report_id": existing.report_id, "metrics": json.dumps(metrics)})
            result.metrics_refreshed += 1
        return None
    if row.live_count == 0:
        stage_logger(__name__).warning(
            "week %s of %s has no live messages left (expired); not rolled up",
            row.week_start,
            scope_ref(row.namespace, row.subject_id),
        )
        result.skipped_expired += 1
        return None
    records = week_records(conn, bounds, tz)
    sampled = sample_for_prompt(records, PROMPT_BUDGET_CHARS)
    result.messages_read += len(records)
    result.messages_sampled_out += len(records) - len(sampled)
    week_ids = [r.message_id for r in conn.execute(SELECT_WEEK_MESSAGE_IDS, bounds)]
    prompt = build_prompt(row.namespace, row.subject_id, row.week_start, sampled)
    return WeekWork(row, bounds, existing, metrics, {r["id"] for r in records}, week_ids, prompt)


def week_records(conn: Connection, bounds: dict[str, Any], tz: ZoneInfo) -> list[dict[str, Any]]:
    """The scope-week's live messages as prompt records, in time order (each text cut to MESSAGE_CHARS)."""
    return [
        {
            "id": m.message_id,
            "role": m.role,
            "time": m.event_at.astimezone(tz).isoformat(),
            "text": m.content[:MESSAGE_CHARS],
        }
        for m in conn.execute(SELECT_WEEK_MESSAGES, bounds)
    ]


def report_row(work: WeekWork, output: RollupOutput, lineage: dict[str, Any]) -> dict[str, Any]:
    """The weekly_reports row of one scope-week from the model's answer (strataflow/memory/reports.py)."""
    row = work.row
    key_events = distinct_events(_key_events(output, work.live_ids, set(work.week_ids), work.existing))
    summary = distinct_bullets(output.summary.strip())
    fts_en, fts_zh = report_fts(summary, key_events)
    return {
        **lineage,
        "namespace": row.namespace,
        "subject_id": row.subject_id,
        "week_start": row.week_start,
        "week_end": week_end(row.week_start),
        "summary": summary,
        "key_events": json.dumps(key_events, ensure_ascii=False),
        "metrics": json.dumps(work.metrics),
        "input_hash": row.input_hash,
        "source_message_ids": work.week_ids,
        "fts_en": fts_en,
        "fts_zh": fts_zh,
    }


def rollup_week(
    engine: Engine,
    gateway: LLMGateway,
    settings: Settings,
    row: Any,
    result: RollupResult,
    recompute: Recompute | None = None,
) -> None:
    """Roll up one scope-week under its advisory lock: read (one transaction), call the model (none open),
    write (a new transaction). Another process holding the lock: skipped, counted unchanged."""
    lock_scope = Scope(row.namespace, row.subject_id, 0, 0)
    model = gateway.model_for(STAGE)
    with engine.connect() as conn, scope_lock(conn, f"rollup:{row.week_start}", lock_scope) as acquired:
        if not acquired:
            result.unchanged += 1
            return
        with conn.begin():
            work = prepare_week(conn, settings, row, result, model, recompute)
        if work is None:
            return
        output = gateway.complete(
            STAGE,
            PROMPT_VERSION,
            work.prompt,
            RollupOutput,
            namespace=row.namespace,
            subject_id=row.subject_id,
            fresh=recompute is not None and recompute.force,
            event_at=work.bounds["start"],
        )
        lineage = {"run_id": gateway.run_id, "prompt_version": PROMPT_VERSION, "model": model}
        with conn.begin():
            write_reports(conn, [report_row(work, output, lineage)], rewrites=work.existing is not None)
        result.reports_written += 1
        if row.week_start not in result.weeks:
            result.weeks.append(row.week_start)


def _key_events(
    output: RollupOutput, live_ids: set[int], week_ids: set[int], existing: Any
) -> list[dict[str, Any]]:
    """The model's events restricted to ids of this week, plus old events whose messages have all expired."""
    events = []
    for event in output.key_events:
        ids = [i for i in event.message_ids if i in live_ids]
        if ids:
            events.append({"event": event.event.strip(), "message_ids": ids})
    if existing is not None:
        for old in existing.key_events or []:
            old_ids = set(old.get("message_ids") or [])
            if old_ids and old_ids <= week_ids and not old_ids & live_ids:
                events.append(old)
    return events


BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+(?P<text>.+)$")


def _said(text: str) -> str:
    """What a line says, for comparing: case, spacing and end punctuation left out."""
    return " ".join(text.casefold().split()).rstrip(" .。!！;；")


def distinct_bullets(summary: str) -> str:
    """The Markdown summary without a bullet line that repeats an earlier bullet of it."""
    seen: set[str] = set()
    lines = []
    for line in summary.splitlines():
        bullet = BULLET.match(line)
        if bullet is not None:
            said = _said(bullet.group("text"))
            if said in seen:
                continue
            seen.add(said)
        lines.append(line)
    return "\n".join(lines)


def distinct_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Key events with the same text as one event (the first's place, every message id of them, in order)."""
    merged: dict[str, dict[str, Any]] = {}
    for event in events:
        said = _said(str(event.get("event") or ""))
        first = merged.get(said)
        if first is None:
            merged[said] = {**event, "message_ids": list(event.get("message_ids") or [])}
            continue
        first["message_ids"] += [i for i in event.get("message_ids") or [] if i not in first["message_ids"]]
    return list(merged.values())


@telemetry.traced("rollup", model_setting="rollup_model")
def rollup_weeks(
    settings: Settings,
    week_start: date | None = None,
    run_id: uuid.UUID | None = None,
    namespace: str | None = None,
    now: datetime | None = None,
    shard: Shard = EVERY_SCOPE,
    recompute: Recompute | None = None,
) -> RollupResult:
    """Roll up one week (week_start: any day of it) or catch up every complete week not (currently) reported,
    over the scopes of one shard (default: all); recompute also re-rolls reports another model or prompt
    version wrote (see the module docstring).

    Each scope-week commits on its own, so a budget stop keeps the weeks written; the next run resumes. A
    scope-week whose model call fails is counted and named (by hash) and the next one goes on.
    """
    engine: Engine = engine_for(settings)
    with engine.connect() as conn:
        rows = scope_weeks(conn, settings, week_start, namespace, shard, now)
    result = RollupResult(weeks_considered=len(rows))
    gateway = stage_gateway(settings, run_id)
    work = partial(rollup_week, engine, gateway, settings, result=result, recompute=recompute)
    run_units(STAGE, gateway, rows, work, result, week_name)
    result.weeks.sort()
    return result


def week_name(row: Any) -> str:
    """How a failed scope-week is named: its scope by hash and its week."""
    return f"{scope_ref(row.namespace, row.subject_id)} week {row.week_start}"
