"""Extract: new L1 messages -> durable L2 memory items, one LLM call per scope batch (never per message).

The prompt lives in tasks/extract_prompt.py (EXTRACT_SYSTEM, the batches, build_extract_messages), its output
schema in models/llm.py (ExtractionOutput) and its upsert in strataflow/memory/store.py. Per scope: the user
messages past the scope's 'extract' watermark, each with the assistant turn just before it as context
(marked in the prompt, cut to CONTEXT_CHARS, never a source of items), chunked to
settings.extract_batch_tokens, each chunk sent with the compact list of the subject's existing keys; items
are applied with the newest event time of their source messages and the watermark advances in the same
transaction. A budget stop ends the stage cleanly; the next run resumes from the watermark. The LLM cache
key of a chunk is its message ids and content hashes (the work's identity).

Recomputing (models/params.py Recompute: a backfill with reprocess, or `strataflow extract --reprocess`):
the scope's messages in the event-time window, batched the same way, whatever the watermark (which it
leaves alone). A scope is skipped when every extracted item citing its window was produced or confirmed by
the configured model and prompt version; otherwise its batches go to the model (the cache answers a batch
this model and prompt version already did, so repeating a reprocess costs nothing). A changed value gets a
new version (the old one stays in history with its model and run); an unchanged one records the confirming
model and run (strataflow/memory/confirmations.py); manual items are never overwritten. Force re-asks the
model for every batch of the window (fresh answers, no cache).

Failures (the policy of models/results.py): a scope whose model call fails is counted and named by hash in
the result's errors, its watermark stays, and the next scope goes on; the task raises when every scope
failed. No database transaction is open during a model call (the scope's advisory lock is a session lock).
Retries live in the gateway only (STRATAFLOW_LLM_MAX_RETRIES); the task does not retry.

Seed 001 hot memory (refresh_hot_memory) is in tasks/hot_memory.py and re-exported here.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from sqlalchemy import Connection, Engine, text

from models.common import MemoryKind
from models.llm import ExtractedItem, ExtractionOutput
from models.params import EVERY_SCOPE, Recompute, Shard
from models.results import ExtractResult, HotMemoryResult
from strataflow.config import Settings
from strataflow.db.engine import engine_for
from strataflow.llm.gateway import BudgetExhausted, LLMError, LLMGateway
from strataflow.memory import store
from strataflow.memory.confirmations import confirm_item
from strataflow.ops.runs import raise_if_all_failed, scope_ref, stage_logger
from strataflow.ops.scopes import (
    EARLIEST,
    Scope,
    ScopeMessage,
    advance_watermark,
    scope_lock,
    scope_messages,
    stage_scopes,
)
from tasks.extract_prompt import (
    EXTRACT_ROLES,
    EXTRACT_SYSTEM,
    PROMPT_VERSION,
    STAGE,
    batch_cache_key,
    build_extract_messages,
    chunk_messages,
)
from tasks.hot_memory import refresh_hot_memory, refresh_hot_memory_task

__all__ = [
    "EXTRACT_ROLES",
    "EXTRACT_SYSTEM",
    "PROMPT_VERSION",
    "ExtractResult",
    "HotMemoryResult",
    "extract_new",
    "extract_new_task",
    "refresh_hot_memory",
    "refresh_hot_memory_task",
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
SELECT_EXISTING_KEYS = text(
    """
    select kind || ':' || key from memory_items
    where namespace = :namespace and subject_id = :subject_id and status = 'active' and kind <> 'hot_summary'
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


def scope_work(
    conn: Connection, scope: Scope, batch_tokens: int, model: str, recompute: Recompute | None = None
) -> ScopeWork:
    """Read a scope's messages past its watermark (or, recomputing, in the window) and batch them; used by
    the run and by the backfill's dry-run plan alike. The caller owns the transaction."""
    if recompute is None:
        messages = scope_messages(conn, scope)
    else:
        messages = scope_messages(conn, scope, recompute.since or EARLIEST)
        messages = [m for m in messages if recompute.covers(m.event_at)]
    batches = list(chunk_messages(messages, batch_tokens))
    current = False
    if recompute is not None and not recompute.force and batches:
        ids = [m.message_id for batch in batches for m in batch if m.role in EXTRACT_ROLES]
        params = {**scope_params(scope), "model": model, "prompt_version": PROMPT_VERSION}
        window = conn.execute(SELECT_WINDOW_ITEMS, {**params, "message_ids": ids}).one()
        current = window.items > 0 and window.stale == 0
    return ScopeWork(messages, batches, current)


def scopes_to_extract(
    conn: Connection, namespace: str | None, shard: Shard, recompute: Recompute | None = None
) -> list[Scope]:
    """This shard's scopes with messages past their watermark (or, recomputing, in the window)."""
    return stage_scopes(conn, STAGE, namespace, shard, recompute)


def extract_new(
    settings: Settings,
    run_id: uuid.UUID | None = None,
    namespace: str | None = None,
    reprocess_since: datetime | None = None,
    progress: bool = True,
    shard: Shard = EVERY_SCOPE,
    recompute: Recompute | None = None,
) -> ExtractResult:
    """Extract L2 items from the messages past every scope's watermark (of one shard; default: all), or
    recompute a window (recompute, or reprocess_since: the window from that event time on)."""
    if reprocess_since is not None and recompute is None:
        recompute = Recompute(since=reprocess_since)
    engine = engine_for(settings)
    gateway = LLMGateway(settings, engine, run_id)
    result = ExtractResult()
    log = stage_logger(__name__)
    with engine.connect() as conn:
        scopes = scopes_to_extract(conn, namespace, shard, recompute)
    bar = _progress(len(scopes), progress)
    try:
        for scope in scopes:
            try:
                _extract_scope(engine, gateway, scope, recompute, result)
            except BudgetExhausted as exc:
                log.warning("%s", exc)
                result.budget_stopped = True
                break
            except LLMError as exc:
                unit = scope_ref(scope.namespace, scope.subject_id)
                result.add_failure(unit, exc)
                log.error("extraction of %s failed: %s", unit, exc)
            finally:
                if bar is not None:
                    bar.update(bar.task_ids[0], advance=1)
    finally:
        if bar is not None:
            bar.stop()
    result.llm_calls, result.cache_hits = gateway.requests_sent, gateway.cache_hits
    result.tokens, result.cost_usd = gateway.tokens_used, round(gateway.cost_usd, 6)
    return result


def _extract_scope(
    engine: Engine, gateway: LLMGateway, scope: Scope, recompute: Recompute | None, result: ExtractResult
) -> None:
    from strataflow.memory.profiles import refresh_documents

    model = gateway.model_for(STAGE)
    with engine.connect() as conn, scope_lock(conn, STAGE, scope) as acquired:
        if not acquired:
            result.scopes_locked += 1
            return
        work = scope_work(conn, scope, gateway.settings.extract_batch_tokens, model, recompute)
        conn.commit()
        if work.current:
            result.scopes_current += 1
            return
        result.scopes += 1
        for index, batch in enumerate(work.batches):
            existing = [row[0] for row in conn.execute(SELECT_EXISTING_KEYS, scope_params(scope))]
            conn.commit()
            output = gateway.complete(
                STAGE,
                PROMPT_VERSION,
                build_extract_messages(batch, existing),
                ExtractionOutput,
                namespace=scope.namespace,
                subject_id=scope.subject_id,
                cache_key=batch_cache_key(batch),
                fresh=recompute is not None and recompute.force,
                event_at=max(m.event_at for m in batch),
            )
            last = index == len(work.batches) - 1
            position = max(m.ingest_seq for m in (work.messages if last else batch))
            with conn.begin():
                _apply_items(conn, gateway, scope, batch, output.items, result)
                refresh_documents(conn, scope.namespace, scope.subject_id)  # both seed 002 documents exist
                if recompute is None:
                    advance_watermark(conn, STAGE, scope, position, gateway.run_id)
            result.messages += sum(m.role in EXTRACT_ROLES for m in batch)
        if not work.batches and work.messages and recompute is None:
            with conn.begin():
                refresh_documents(conn, scope.namespace, scope.subject_id)
                position = max(m.ingest_seq for m in work.messages)
                advance_watermark(conn, STAGE, scope, position, gateway.run_id)


def _apply_items(
    conn: Connection,
    gateway: LLMGateway,
    scope: Scope,
    batch: list[ScopeMessage],
    items: list[ExtractedItem],
    result: ExtractResult,
) -> bool:
    """Upsert the batch's items (sources: the subject's own turns only); True when any item changed. An
    unchanged extracted item records the confirming model and run."""
    by_id = {m.message_id: m for m in batch if m.role in EXTRACT_ROLES}
    model = gateway.model_for(STAGE)
    changed = False
    for item in items:
        sources = [i for i in item.source_message_ids if i in by_id]
        if not sources or item.kind is MemoryKind.hot_summary:
            result.items_dropped += 1
            continue
        identity = {"namespace": scope.namespace, "subject_id": scope.subject_id}
        identity |= {"kind": item.kind.value, "key": item.key}
        action = store.upsert_item(
            conn,
            namespace=scope.namespace,
            subject_id=scope.subject_id,
            kind=item.kind.value,
            key=item.key,
            value=item.value,
            statement=item.statement,
            category=item.category,
            importance=item.importance,
            confidence=item.confidence,
            source="extracted",
            event_at=max(by_id[i].event_at for i in sources),
            source_message_ids=sources,
            run_id=gateway.run_id,
            prompt_version=PROMPT_VERSION,
            model=model,
            metadata={"approximate": True} if item.approximate else None,
        )
        if action == store.UNCHANGED and confirm_item(
            conn, **identity, model=model, prompt_version=PROMPT_VERSION, run_id=gateway.run_id
        ):
            result.items_confirmed += 1
        changed |= _count(action, item, scope, result)
    return changed


def _count(action: str, item: ExtractedItem, scope: Scope, result: ExtractResult) -> bool:
    if action == store.NEW:
        result.items_new += 1
    elif action in store.CHANGED_ACTIONS:
        result.items_changed += 1
    elif action == store.KEPT_OLDER:
        result.items_kept_older += 1
    elif action == store.MANUAL_PROTECTED:
        result.manual_conflicts.append(
            {
                "namespace": scope.namespace,
                "subject_id": scope.subject_id,
                "kind": item.kind.value,
                "key": item.key,
                "extracted_value": item.value,
            }
        )
    else:
        result.items_unchanged += 1
    return action in store.CHANGED_ACTIONS


def scope_params(scope: Scope) -> dict[str, str]:
    return {"namespace": scope.namespace, "subject_id": scope.subject_id}


def _progress(total: int, enabled: bool) -> Any:
    if not enabled or total == 0:
        return None
    from rich.console import Console
    from rich.progress import Progress

    bar = Progress(console=Console(stderr=True), transient=True)
    bar.add_task("extract", total=total)
    bar.start()
    return bar


@task(name="extract-new", cache_policy=NO_CACHE)
def extract_new_task(
    settings: Settings,
    run_id: uuid.UUID | None = None,
    namespace: str | None = None,
    shard: Shard = EVERY_SCOPE,
    recompute: Recompute | None = None,
) -> ExtractResult:
    """Extract L2 memory from new L1 messages (or recompute a window) for one shard of the scopes; raises
    when every scope failed (no task retries: the gateway retries each request)."""
    result = extract_new(
        settings, run_id=run_id, namespace=namespace, progress=False, shard=shard, recompute=recompute
    )
    raise_if_all_failed(result, STAGE)
    return result
