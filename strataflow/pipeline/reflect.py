"""Insight reflection (seed 004, in the spirit of MemoryScope): L2 items not yet reflected -> insights.

Pending items are the active items whose `reflected_version` differs from their `version` (seed 004
obs_reflected), so each version of an item is reflected once. Per scope, one request (stage "reflect", the
items in a `<memories>` block, at most BATCH_ITEMS per request) returns insights keyed by attribute
("occupation": "What is the user's occupation?") with a statement, a confidence and evidence item ids.

Writing an insight for (namespace, subject, key):
- no current insight: insert it (valid_from = the newest event time of its evidence);
- the same statement as the current one: nothing is written;
- a different statement with newer (or equal) evidence: the current one is closed (valid_to = the new
  evidence's valid_from, superseded_at = now) and the new one becomes current;
- a different statement whose evidence is older than the current insight (a backfill): it goes straight
  into history (valid_to = the current insight's valid_from), the current one stays.
Contradicting insights for one key in one answer are applied oldest evidence first, so the newest wins and
the older stays in history. Deleted items and the internal hot_summary kind are marked reflected without a
request (a deleted fact's insight stays until a newer statement replaces it).

A restore (`strataflow import`, restore_insight) writes an exported insight as it was (times and embedding
included) unless the subject already has it (same key, valid_from and statement) or already has another
current insight for its key.

Per scope: read under a session advisory lock, call the model with no transaction open, write in a new
transaction. The scopes fan out over Dask workers by shard (models/params.py Shard). Failures follow the
LLM stage policy of models/results.py; retries live in the gateway only.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from functools import partial
from typing import Any

from sqlalchemy import Connection, Engine, text

from models.lifecycle import ReflectResult
from models.llm import ReflectedInsight, ReflectionOutput
from models.params import EVERY_SCOPE, Shard
from strataflow.config import Settings
from strataflow.db.engine import engine_for
from strataflow.llm.gateway import LLMGateway
from strataflow.memory.api import NAMESPACE_VISIBLE
from strataflow.pipeline.reflect_prompt import PROMPT_VERSION, STAGE, build_prompt
from strataflow.pipeline.runs import scope_ref, stage_logger
from strataflow.pipeline.scopes import Scope, scope_lock, unreflected_scopes
from strataflow.pipeline.stage_loop import run_units, scope_name, stage_gateway

BATCH_ITEMS = 150
REFLECTED_KINDS = (
    "fact",
    "preference",
    "intent",
    "meta",
    "status",
    "decision",
    "feedback",
    "reference",
    "observation",
)

SELECT_PENDING_ITEMS = text(
    f"""
    select item_id, kind, key, value, statement, valid_from, version, status, source_message_ids
    from memory_items
    where namespace = :namespace and subject_id = :subject_id and reflected_version is distinct from version
        and {NAMESPACE_VISIBLE}
    order by valid_from, item_id
    """
)
SELECT_CURRENT_INSIGHT = text(
    """
    select insight_id, statement, valid_from from insights
    where namespace = :namespace and subject_id = :subject_id and key = :key and valid_to is null
    for update
    """
)
CLOSE_INSIGHT = text(
    """
    update insights set valid_to = greatest(:valid_to, valid_from), superseded_at = now()
    where insight_id = :insight_id
    """
)
INSERT_INSIGHT = text(
    """
    insert into insights (namespace, subject_id, key, question, statement, confidence, evidence_item_ids,
                          evidence_message_ids, valid_from, valid_to, superseded_at, run_id, prompt_version,
                          model)
    values (:namespace, :subject_id, :key, :question, :statement, :confidence, :evidence_item_ids,
            :evidence_message_ids, :valid_from, :valid_to, :superseded_at, :run_id, :prompt_version, :model)
    """
)
RESTORE_INSIGHT = text(
    """
    insert into insights (namespace, subject_id, key, question, statement, confidence, evidence_item_ids,
                          evidence_message_ids, valid_from, valid_to, recorded_at, superseded_at, embedding,
                          embedding_model, run_id, prompt_version, model)
    select :namespace, :subject_id, :key, :question, :statement, :confidence, :evidence_item_ids,
           :evidence_message_ids, :valid_from, :valid_to, :recorded_at, :superseded_at, :embedding,
           :embedding_model, :run_id, :prompt_version, :model
    where not exists (
        select 1 from insights
        where namespace = :namespace and subject_id = :subject_id and key = :key
            and valid_from = :valid_from and statement = :statement
    )
    on conflict do nothing
    returning insight_id
    """
)
MARK_REFLECTED = text(
    """
    update memory_items set reflected_version = :version
    where item_id = :item_id and version = :version
    """
)


def write_insight(
    conn: Connection,
    namespace: str,
    subject_id: str,
    insight: ReflectedInsight,
    evidence: list[Any],
    lineage: dict[str, Any],
    result: ReflectResult,
) -> None:
    """Apply one insight to the insights table (rules: module docstring); the caller owns the transaction."""
    valid_from = max(item.valid_from for item in evidence)
    message_ids = sorted({mid for item in evidence for mid in (item.source_message_ids or [])})
    statement = insight.statement.strip()
    scope = {"namespace": namespace, "subject_id": subject_id, "key": insight.key}
    current = conn.execute(SELECT_CURRENT_INSIGHT, scope).first()
    row = {
        **scope,
        **lineage,
        "question": insight.question.strip(),
        "statement": statement,
        "confidence": insight.confidence,
        "evidence_item_ids": sorted(item.item_id for item in evidence),
        "evidence_message_ids": message_ids,
        "valid_from": valid_from,
        "valid_to": None,
        "superseded_at": None,
    }
    if current is None:
        conn.execute(INSERT_INSIGHT, row)
        result.insights_created += 1
    elif current.statement.strip() == statement:
        result.insights_unchanged += 1
    elif valid_from < current.valid_from:
        row.update(valid_to=current.valid_from, superseded_at=datetime.now(UTC))
        conn.execute(INSERT_INSIGHT, row)
        result.insights_historical += 1
    else:
        conn.execute(CLOSE_INSIGHT, {"insight_id": current.insight_id, "valid_to": valid_from})
        conn.execute(INSERT_INSIGHT, row)
        result.insights_updated += 1


def restore_insight(conn: Connection, row: dict[str, Any]) -> bool:
    """Write an exported insight (the columns of RESTORE_INSIGHT, ids already mapped); False when the subject
    already has it or another current insight for its key (module docstring). The caller owns the
    transaction."""
    return conn.execute(RESTORE_INSIGHT, row).first() is not None


def applicable_insights(
    output: ReflectionOutput, batch: list[Any], unit: str
) -> list[tuple[ReflectedInsight, list[Any]]]:
    """The answer's insights with their evidence items from the batch, oldest evidence first (so the newest
    ends up current); an insight citing no item of the batch is skipped with a warning."""
    by_id = {item.item_id: item for item in batch}
    applicable = []
    for insight in output.insights:
        evidence = [by_id[i] for i in dict.fromkeys(insight.evidence_item_ids) if i in by_id]
        if evidence:
            applicable.append((max(item.valid_from for item in evidence), insight, evidence))
        else:
            stage_logger(__name__).warning(
                "reflect %s: insight %r cites no item of the prompt; skipped", unit, insight.key
            )
    applicable.sort(key=lambda entry: entry[0])
    return [(insight, evidence) for _, insight, evidence in applicable]


def reflect_scope(engine: Engine, gateway: LLMGateway, target: Scope, result: ReflectResult) -> None:
    """Reflect one scope's pending items under its advisory lock: read them (one transaction), ask the model
    (one request per BATCH_ITEMS, no transaction open), then write the insights and mark the items reflected
    in one new transaction (an item changed meanwhile keeps its new version pending)."""
    namespace, subject_id = target.namespace, target.subject_id
    unit = scope_ref(namespace, subject_id)
    scope = {"namespace": namespace, "subject_id": subject_id}
    with engine.connect() as conn, scope_lock(conn, STAGE, target) as acquired:
        if not acquired:
            return
        with conn.begin():
            pending = list(conn.execute(SELECT_PENDING_ITEMS, scope))
        result.scopes += 1
        usable = [item for item in pending if item.status == "active" and item.kind in REFLECTED_KINDS]
        answers = []
        for offset in range(0, len(usable), BATCH_ITEMS):
            batch = usable[offset : offset + BATCH_ITEMS]
            output = gateway.complete(
                STAGE,
                PROMPT_VERSION,
                build_prompt(batch),
                ReflectionOutput,
                namespace=namespace,
                subject_id=subject_id,
            )
            answers += applicable_insights(output, batch, unit)
        lineage = {
            "run_id": gateway.run_id,
            "prompt_version": PROMPT_VERSION,
            "model": gateway.model_for(STAGE),
        }
        with conn.begin():
            for insight, evidence in answers:
                write_insight(conn, namespace, subject_id, insight, evidence, lineage, result)
            for item in pending:
                conn.execute(MARK_REFLECTED, {"item_id": item.item_id, "version": item.version})
        result.items_reflected += len(pending)


def reflect_pending(
    settings: Settings,
    run_id: uuid.UUID | None = None,
    namespace: str | None = None,
    shard: Shard = EVERY_SCOPE,
) -> ReflectResult:
    """Reflect every scope (of one shard; default: all) with items not yet reflected; each scope commits on
    its own, and a scope whose model call fails is counted and named (by hash) while the next one goes on."""
    engine: Engine = engine_for(settings)
    with engine.connect() as conn:
        scopes = unreflected_scopes(conn, namespace, shard)
    result = ReflectResult()
    gateway = stage_gateway(settings, run_id)
    work = partial(reflect_scope, engine, gateway, result=result)
    return run_units(STAGE, gateway, scopes, work, result, scope_name)
