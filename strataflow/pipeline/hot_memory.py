"""Hot memory (seed 001): for every scope with new messages since its 'hot_summary' watermark, a compact
summary of its last 50 messages, stored in L2 as kind 'hot_summary', key 'hot_summary' (one current row per
scope, older summaries in memory_item_versions). The value is {"summary": ..., "messages": n}.

As seed 001's refreshHotMemory, the same call also returns the typed items the messages state (kinds status,
decision, preference; other kinds are dropped); they are applied to L2 like extracted items, by
strataflow/pipeline/apply.py (one row per (scope, kind, key): an unchanged value writes nothing, a manual item
is never overwritten).

Recomputing (a backfill with reprocess, models/params.py Recompute): every scope with messages in the window
gets its summary rewritten unless the configured model and prompt version wrote (or confirmed) the current
one (force: always, with a fresh answer); unchanged summaries and items record the confirming model and run;
the watermark is left alone. Scopes fan out by shard.

Failures follow the one stage loop (strataflow/pipeline/stage_loop.py): a failed scope is counted and named by
hash, the others go on, and the task raises only when every scope failed. The model is called with no
transaction open; retries live in the gateway only.
"""

from __future__ import annotations

import json
import uuid
from functools import partial
from typing import Any

from sqlalchemy import Connection, Engine, text

from models.llm import HotSummaryOutput
from models.params import EVERY_SCOPE, Recompute, Shard
from models.results import HotMemoryResult
from strataflow.config import Settings
from strataflow.db.engine import engine_for
from strataflow.llm.gateway import LLMGateway
from strataflow.memory import store
from strataflow.memory.confirmations import confirm_item
from strataflow.memory.profiles import refresh_documents
from strataflow.pipeline.apply import Lineage, apply_extracted
from strataflow.pipeline.hot_memory_prompt import PROMPT_VERSION, STAGE, hot_prompt
from strataflow.pipeline.scopes import Scope, advance_watermark, scope_lock, stage_scopes
from strataflow.pipeline.stage_loop import run_units, scope_name, stage_gateway

LAST_MESSAGES = 50
HOT_KINDS = frozenset({"status", "decision", "preference"})

SELECT_LAST_MESSAGES = text(
    """
    select message_id, role, content, content_hash, event_at
    from conversation_messages
    where namespace = :namespace and subject_id = :subject_id
    order by event_at desc, message_id desc
    limit :limit
    """
)

# Whether the scope's current summary was written or confirmed by the configured model and prompt version.
SELECT_SUMMARY_CURRENT = text(
    """
    select (coalesce(confirmed_model, model), coalesce(confirmed_prompt_version, prompt_version))
           = (cast(:model as text), cast(:prompt_version as text))
    from memory_items
    where namespace = :namespace and subject_id = :subject_id and agent_id is null and kind = 'hot_summary'
      and key = 'hot_summary'
    """
)


def hot_scopes(
    conn: Connection, namespace: str | None, shard: Shard, recompute: Recompute | None = None
) -> list[Scope]:
    """This shard's scopes with messages past their hot_summary watermark (or, recomputing, in the window)."""
    return stage_scopes(conn, STAGE, namespace, shard, recompute)


def last_messages(conn: Connection, scope: Scope) -> list[Any]:
    """The scope's last LAST_MESSAGES messages, oldest first."""
    params = {"namespace": scope.namespace, "subject_id": scope.subject_id, "limit": LAST_MESSAGES}
    return list(reversed(conn.execute(SELECT_LAST_MESSAGES, params).all()))


def summary_is_current(conn: Connection, scope: Scope, model: str) -> bool:
    """True when the configured model and prompt version wrote or confirmed the scope's current summary."""
    params = {"namespace": scope.namespace, "subject_id": scope.subject_id, "model": model}
    return bool(conn.execute(SELECT_SUMMARY_CURRENT, {**params, "prompt_version": PROMPT_VERSION}).scalar())


def refresh_hot_memory(
    settings: Settings,
    run_id: uuid.UUID | None = None,
    namespace: str | None = None,
    shard: Shard = EVERY_SCOPE,
    recompute: Recompute | None = None,
    *,
    subject_id: str | None = None,
) -> HotMemoryResult:
    """Refresh the hot summary (and typed items) of every scope (of one shard; default: all; of one namespace
    and one subject, when given) with messages past its hot_summary watermark, or recompute the summaries of
    the scopes with messages in a window."""
    engine = engine_for(settings)
    gateway = stage_gateway(settings, run_id)
    result = HotMemoryResult()
    with engine.connect() as conn:
        scopes = hot_scopes(conn, namespace, shard, recompute)
    scopes = [scope for scope in scopes if subject_id is None or scope.subject_id == subject_id]
    work = partial(refresh_scope, engine, gateway, recompute, result)
    return run_units(STAGE, gateway, scopes, work, result, scope_name)


def refresh_scope(
    engine: Engine, gateway: LLMGateway, recompute: Recompute | None, result: HotMemoryResult, scope: Scope
) -> None:
    """One scope under its advisory lock: read its last messages, ask the model (no transaction open), write
    the summary, its typed items and the watermark in one transaction."""
    model = gateway.model_for(STAGE)
    lineage = Lineage(gateway.run_id, PROMPT_VERSION, model)
    with engine.connect() as conn, scope_lock(conn, STAGE, scope) as acquired:
        if not acquired:
            return
        if recompute is not None and not recompute.force and summary_is_current(conn, scope, model):
            conn.commit()
            result.scopes_current += 1
            return
        rows = last_messages(conn, scope)
        conn.commit()
        result.scopes += 1
        output = gateway.complete(
            STAGE,
            PROMPT_VERSION,
            hot_prompt(rows),
            HotSummaryOutput,
            namespace=scope.namespace,
            subject_id=scope.subject_id,
            cache_key=json.dumps([[r.message_id, r.content_hash] for r in rows]),
            fresh=recompute is not None and recompute.force,
            event_at=max((r.event_at for r in rows), default=None),
        )
        cites = {r.message_id: r.event_at for r in rows}
        sources = [i for i in output.source_message_ids if i in cites] or sorted(cites)
        identity: dict[str, Any] = {"namespace": scope.namespace, "subject_id": scope.subject_id}
        identity |= {"kind": "hot_summary", "key": "hot_summary"}
        with conn.begin():
            action = store.upsert_item(
                conn, **identity, value={"summary": output.summary, "messages": len(rows)},
                statement=output.summary, importance=50, confidence=1.0, source="extracted",
                event_at=max(cites.values()), source_message_ids=sources, run_id=lineage.run_id,
                prompt_version=PROMPT_VERSION, model=model, settings=gateway.settings,
            )  # fmt: skip
            if action == store.UNCHANGED:  # a recompute by another model: record who confirmed it
                confirm_item(
                    conn, **identity, model=model, prompt_version=PROMPT_VERSION, run_id=lineage.run_id
                )
            typed = apply_extracted(
                conn, scope.namespace, scope.subject_id, output.items, cites, lineage, kinds=HOT_KINDS,
                settings=gateway.settings,
            )  # fmt: skip
            if typed.changed:  # status items are the projects of the seed 002 work document
                refresh_documents(conn, scope.namespace, scope.subject_id)
            result.items_written += typed.changed
            if recompute is None:
                advance_watermark(
                    conn, STAGE, scope.namespace, scope.subject_id, lineage.run_id, position=scope.upto_seq
                )
        result.summaries_written += action in store.CHANGED_ACTIONS
