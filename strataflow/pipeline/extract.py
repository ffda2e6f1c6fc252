"""Extract: new L1 messages -> durable L2 memory items, one LLM call per scope batch (never per message).

The prompt lives in strataflow/pipeline/extract_prompt.py (EXTRACT_SYSTEM, the batches,
build_extract_messages), its output schema in models/llm.py (ExtractionOutput) and its upsert in
strataflow/memory/store.py. Per scope: the user messages past the scope's 'extract' watermark, each with the
assistant turn just before it as context (marked in the prompt, cut to CONTEXT_CHARS, never a source of
items), chunked to settings.extract_batch_tokens, each chunk sent with the compact list of the subject's
existing keys; the answer's items are applied by strataflow/pipeline/apply.py (the newest event time of
their source messages) and the watermark advances in the same transaction. A budget stop ends the stage
cleanly; the next run resumes from the watermark. The LLM cache key of a chunk is its message ids and content
hashes (the work's identity).

Recomputing (models/params.py Recompute: a backfill with reprocess, or `strataflow extract --reprocess`):
the scope's messages in the event-time window, batched the same way, whatever the watermark (which it
leaves alone). A scope is skipped when every extracted item citing its window was produced or confirmed by
the configured model and prompt version; otherwise its batches go to the model (the cache answers a batch
this model and prompt version already did, so repeating a reprocess costs nothing). A changed value gets a
new version (the old one stays in history with its model and run); an unchanged one records the confirming
model and run (strataflow/memory/confirmations.py); manual items are never overwritten. Force re-asks the
model for every batch of the window (fresh answers, no cache).

Failures follow the one stage loop (strataflow/pipeline/stage_loop.py): a scope whose model call fails is
counted and named by hash in the result's errors, its watermark stays, and the next scope goes on; the task
raises when every scope failed. No database transaction is open during a model call (the scope's advisory
lock is a session lock). Retries live in the gateway only (STRATAFLOW_LLM_MAX_RETRIES); the task does not
retry.

Seed 001 hot memory (refresh_hot_memory) is in strataflow/pipeline/hot_memory.py.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, text

from models.params import EVERY_SCOPE, Recompute, Shard
from models.results import ExtractResult
from strataflow import telemetry
from strataflow.config import Settings
from strataflow.db.engine import engine_for
from strataflow.llm.gateway import LLMGateway
from strataflow.llm.ledger import input_hash
from strataflow.memory import store
from strataflow.memory.api import NAMESPACE_VISIBLE
from strataflow.memory.profiles import refresh_documents
from strataflow.pipeline.apply import Applied, Lineage, apply_extracted
from strataflow.pipeline.extract_prompt import (
    EXTRACT_ROLES,
    EXTRACT_SYSTEM,
    PROMPT_VERSION,
    STAGE,
    ExtractPrompt,
    answer_context,
    batch_cache_key,
    build_extract_messages,
    chunk_messages,
    extract_prompt,
)
from strataflow.pipeline.progress import progress_bar
from strataflow.pipeline.scopes import (
    EARLIEST,
    Scope,
    ScopeMessage,
    advance_watermark,
    scope_lock,
    scope_messages,
    stage_scopes,
)
from strataflow.pipeline.stage_loop import run_units, scope_name, stage_gateway

__all__ = [
    "EXTRACT_ROLES",
    "EXTRACT_SYSTEM",
    "PROMPT_VERSION",
    "STAGE",
    "ExtractResult",
    "build_extract_messages",
    "extract_new",
    "extract_prompt",
]

# Items the extraction stage wrote from a message of a recompute window (typed items of hot memory have their
# own prompt version and are not counted), and how many of them another model or prompt version produced (and
# no confirmation by the configured ones since).
SELECT_WINDOW_ITEMS = text(
    """
    select count(*) as items,
           count(*) filter (where (coalesce(confirmed_model, model), coalesce(confirmed_prompt_version,
                                   prompt_version)) is distinct from (cast(:model as text),
                                   cast(:prompt_version as text))) as stale
    from memory_items
    where namespace = :namespace and subject_id = :subject_id and agent_id is null and source = 'extracted'
      and status = 'active' and kind <> 'hot_summary' and prompt_version like 'extract-%'
      and source_message_ids && cast(:message_ids as bigint[])
    """
)
# The window's messages (message_id:content_hash) that no cached answer of this model and prompt version
# covered (sql/482: an extraction answer records the messages of its batch).
SELECT_UNCOVERED = text(
    """
    select count(*) from unnest(cast(:keys as text[])) as k (message_key)
    where not exists (
        select 1 from llm_cache as c
        where c.stage = 'extract' and c.prompt_version = :prompt_version and c.model = :model
            and coalesce(c.namespace, '') = :namespace and c.subject_id = :subject_id
            and k.message_key = any(c.message_keys)
    )
    """
)
RECORD_COVERED = text(
    """
    update llm_cache set message_keys = cast(:keys as text[])
    where stage = 'extract' and prompt_version = :prompt_version and model = :model
        and coalesce(namespace, '') = :namespace and input_hash = :input_hash
        and message_keys is distinct from cast(:keys as text[])
    """
)
SELECT_EXISTING_KEYS = text(
    f"""
    select kind || ':' || key from memory_items
    where namespace = :namespace and subject_id = :subject_id and status = 'active' and kind <> 'hot_summary'
        and {NAMESPACE_VISIBLE}
    order by kind, key
    """
)


@dataclass
class ScopeWork:
    """One scope's extraction work: the messages read, their batches, and (recomputing) whether the scope's
    window is already current for the configured model and prompt version."""

    messages: list[ScopeMessage]
    batches: list[list[ScopeMessage]]
    current: bool = False


def scope_params(scope: Scope) -> dict[str, str]:
    return {"namespace": scope.namespace, "subject_id": scope.subject_id}


def existing_keys(conn: Connection, namespace: str, subject_id: str) -> list[str]:
    """The subject's current kind:key pairs, which the prompt lists so the model reuses them."""
    params = {"namespace": namespace, "subject_id": subject_id}
    return [row[0] for row in conn.execute(SELECT_EXISTING_KEYS, params)]


def scope_work(
    conn: Connection,
    scope: Scope,
    batch_tokens: int,
    model: str,
    recompute: Recompute | None = None,
    prompt_version: str = PROMPT_VERSION,
) -> ScopeWork:
    """Read a scope's messages past its watermark (or, recomputing, in the window) and batch them; used by
    the run and by the backfill's dry-run plan alike. The caller owns the transaction. prompt_version: the
    configured profile's (extract_prompt), which a recomputed window must be current for."""
    if recompute is None:
        messages = scope_messages(conn, scope)
    else:
        messages = scope_messages(conn, scope, recompute.since or EARLIEST)
        messages = [m for m in messages if recompute.covers(m.event_at)]
    batches = list(chunk_messages(messages, batch_tokens))
    current = False
    if recompute is not None and not recompute.force and batches:
        ids = [m.message_id for batch in batches for m in batch if m.role in EXTRACT_ROLES]
        params = {**scope_params(scope), "model": model, "prompt_version": prompt_version}
        window = conn.execute(SELECT_WINDOW_ITEMS, {**params, "message_ids": ids}).one()
        current = window.stale == 0 and (
            window.items > 0  # every item citing the window is this model's
            or not conn.execute(SELECT_UNCOVERED, {**params, "keys": message_keys(messages)}).scalar_one()
        )  # (or its messages gave no item, and this model and prompt version answered each of them)
    return ScopeWork(messages, batches, current)


def message_keys(messages: list[ScopeMessage]) -> list[str]:
    """message_id:content_hash of each message (what an answer covered: sql/482)."""
    return [f"{m.message_id}:{m.content_hash}" for m in messages]


def record_covered(
    conn: Connection, scope: Scope, model: str, prompt: ExtractPrompt, batch: list[ScopeMessage]
) -> None:
    """Note on the batch's cached answer which messages it covered (the caller owns the transaction)."""
    params = {
        "prompt_version": prompt.version,
        "model": model,
        "namespace": scope.namespace,
        "input_hash": input_hash([], prompt.schema, batch_cache_key(batch)),
        "keys": message_keys(batch),
    }
    conn.execute(RECORD_COVERED, params)


def scopes_to_extract(
    conn: Connection, namespace: str | None, shard: Shard, recompute: Recompute | None = None
) -> list[Scope]:
    """This shard's scopes with messages past their watermark (or, recomputing, in the window)."""
    return stage_scopes(conn, STAGE, namespace, shard, recompute)


@telemetry.traced("extract", model_setting="extract_model")
def extract_new(
    settings: Settings,
    run_id: uuid.UUID | None = None,
    namespace: str | None = None,
    reprocess_since: datetime | None = None,
    progress: bool = True,
    shard: Shard = EVERY_SCOPE,
    recompute: Recompute | None = None,
    answers_only: bool = False,
) -> ExtractResult:
    """Extract L2 items from the messages past every scope's watermark (of one shard; default: all), or
    recompute a window (recompute, or reprocess_since: the window from that event time on). answers_only:
    apply what a provider batch answered (strataflow/pipeline/extract_batch.py) and send nothing; a scope
    without an answer is deferred to the next run."""
    if reprocess_since is not None and recompute is None:
        recompute = Recompute(since=reprocess_since)
    engine = engine_for(settings)
    gateway = stage_gateway(settings, run_id, answers_only)
    result = ExtractResult()
    with engine.connect() as conn:
        scopes = scopes_to_extract(conn, namespace, shard, recompute)
    with progress_bar(STAGE, len(scopes), progress) as advance:

        def work(scope: Scope) -> None:
            try:
                _extract_scope(engine, gateway, scope, recompute, result)
            finally:
                advance(1)

        return run_units(STAGE, gateway, scopes, work, result, scope_name)


def _extract_scope(
    engine: Engine, gateway: LLMGateway, scope: Scope, recompute: Recompute | None, result: ExtractResult
) -> None:
    model = gateway.model_for(STAGE)
    prompt = extract_prompt(gateway.settings)
    lineage = Lineage(gateway.run_id, prompt.version, model)
    with engine.connect() as conn, scope_lock(conn, STAGE, scope) as acquired:
        if not acquired:
            result.scopes_locked += 1
            return
        batch_tokens = prompt.batch_tokens(gateway.settings)
        work = scope_work(conn, scope, batch_tokens, model, recompute, prompt.version)
        conn.commit()
        if work.current:
            result.scopes_current += 1
            return
        result.scopes += 1
        for index, batch in enumerate(work.batches):
            existing = existing_keys(conn, scope.namespace, scope.subject_id)
            conn.commit()
            output = gateway.complete(
                STAGE,
                prompt.version,
                prompt.messages(batch, existing),
                prompt.schema_for(batch),
                namespace=scope.namespace,
                subject_id=scope.subject_id,
                cache_key=batch_cache_key(batch),
                fresh=recompute is not None and recompute.force,
                event_at=max(m.event_at for m in batch),
                context=answer_context(batch),
            )
            last = index == len(work.batches) - 1
            position = max(m.ingest_seq for m in (work.messages if last else batch))
            cites = {
                m.message_id: m.event_at for m in batch if m.role in EXTRACT_ROLES
            }  # the subject's turns
            with conn.begin():
                applied = apply_extracted(
                    conn, scope.namespace, scope.subject_id, output.items, cites, lineage,
                    settings=gateway.settings,
                )  # fmt: skip
                count_applied(applied, scope, result)
                record_covered(conn, scope, model, prompt, batch)
                result.items_dropped += output.unsupported  # items the answer could not rest on its lines
                refresh_documents(conn, scope.namespace, scope.subject_id)  # both seed 002 documents exist
                if recompute is None:
                    advance_watermark(
                        conn, STAGE, scope.namespace, scope.subject_id, gateway.run_id, position=position
                    )
            result.messages += len(cites)
        if not work.batches and work.messages and recompute is None:
            with conn.begin():
                refresh_documents(conn, scope.namespace, scope.subject_id)
                position = max(m.ingest_seq for m in work.messages)
                advance_watermark(
                    conn, STAGE, scope.namespace, scope.subject_id, gateway.run_id, position=position
                )


def count_applied(applied: Applied, scope: Scope, result: ExtractResult) -> None:
    """Add what one answer did to the stage's counts (a manual item kept out is listed, never recorded)."""
    result.items_dropped += applied.dropped
    for entry in applied.items:
        result.items_confirmed += entry.confirmed
        if entry.action == store.NEW:
            result.items_new += 1
        elif entry.changed:
            result.items_changed += 1
        elif entry.action == store.KEPT_OLDER:
            result.items_kept_older += 1
        elif entry.action == store.MANUAL_PROTECTED:
            conflict: dict[str, Any] = {**scope_params(scope), "kind": entry.item.kind.value}
            result.manual_conflicts.append(
                {**conflict, "key": entry.item.key, "extracted_value": entry.item.value}
            )
        else:
            result.items_unchanged += 1
