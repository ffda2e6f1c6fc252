"""The LLM gateway's bookkeeping in Postgres: the `llm_calls` ledger, the `llm_cache` and a run's spend.

strataflow.llm.gateway decides when to send, retry, repair or refuse; this module holds what it reads and
writes around that: the identity of a piece of work (`LLMCall`, keyed by `input_hash`), one ledger row per
request sent (committed on its own connection, so it survives the caller's rollback), the cached parsed
answer of that work, and the tokens and USD a run has spent so far, in all and per namespace (for the budget
checks). The cache is keyed by namespace too (sql/282): one namespace never reads another's answers.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from sqlalchemy import Engine, text

T = TypeVar("T", bound=BaseModel)

SELECT_CACHE = text(
    """
    select response from llm_cache
    where stage = :stage and prompt_version = :prompt_version and model = :model
        and coalesce(namespace, '') = coalesce(cast(:namespace as text), '') and input_hash = :input_hash
    """
)
INSERT_CACHE = text(
    """
    insert into llm_cache (stage, prompt_version, model, input_hash, namespace, subject_id, response)
    values (:stage, :prompt_version, :model, :input_hash, :namespace, :subject_id, cast(:response as jsonb))
    on conflict (stage, prompt_version, model, (coalesce(namespace, '')), input_hash) do update
    set response = excluded.response, created_at = now()
    """
)
INSERT_CALL = text(
    """
    insert into llm_calls (run_id, stage, namespace, subject_id, model, prompt_version, input_hash, attempt,
                           prompt_tokens, completion_tokens, cost_usd, latency_ms, outcome, error, event_at)
    values (:run_id, :stage, :namespace, :subject_id, :model, :prompt_version, :input_hash, :attempt,
            :prompt_tokens, :completion_tokens, :cost_usd, :latency_ms, :outcome, :error, :event_at)
    """
)
SELECT_RUN_SPEND = text(
    """
    select coalesce(sum(prompt_tokens + completion_tokens), 0) as tokens,
           coalesce(sum(cost_usd), 0) as cost_usd
    from llm_calls where run_id = :run_id
    """
)


SELECT_NAMESPACE_SPEND = text(
    """
    select coalesce(sum(prompt_tokens + completion_tokens), 0)
    from llm_calls where run_id = :run_id and namespace = :namespace
    """
)


@dataclass(frozen=True)
class LLMCall:
    """What identifies one piece of LLM work in the ledger and the cache."""

    stage: str
    prompt_version: str
    model: str
    input_hash: str
    namespace: str | None
    subject_id: str | None


def input_hash(messages: list[dict[str, Any]], schema: type[BaseModel], cache_key: str | None = None) -> str:
    """sha256 of the work: the caller's deterministic key when given, else the messages and the schema."""
    basis = cache_key if cache_key is not None else json.dumps(messages, ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(f"{schema.__name__}\n{basis}".encode()).hexdigest()


def record_call(
    engine: Engine,
    run_id: uuid.UUID | None,
    call: LLMCall,
    attempt: int,
    outcome: str,
    latency_ms: int,
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
    cost: float | None = None,
    error: str | None = None,
    event_at: datetime | None = None,
) -> None:
    """One ledger row for one request sent, committed on its own connection (event_at: the event time of
    the work it was about)."""
    with engine.begin() as conn:
        conn.execute(
            INSERT_CALL,
            {
                "run_id": run_id,
                "stage": call.stage,
                "namespace": call.namespace,
                "subject_id": call.subject_id,
                "model": call.model,
                "prompt_version": call.prompt_version,
                "input_hash": call.input_hash,
                "attempt": attempt,
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "cost_usd": cost,
                "latency_ms": latency_ms,
                "outcome": outcome,
                "error": error,
                "event_at": event_at,
            },
        )


def run_spend(engine: Engine, run_id: uuid.UUID) -> tuple[int, float]:
    """(tokens, usd) the ledger holds for the run."""
    with engine.connect() as conn:
        row = conn.execute(SELECT_RUN_SPEND, {"run_id": run_id}).one()
    return int(row.tokens), float(row.cost_usd)


def namespace_spend(engine: Engine, run_id: uuid.UUID, namespace: str) -> int:
    """Tokens the ledger holds for the run's requests of one namespace."""
    with engine.connect() as conn:
        return int(
            conn.execute(SELECT_NAMESPACE_SPEND, {"run_id": run_id, "namespace": namespace}).scalar_one()
        )


def cached_answer(engine: Engine, call: LLMCall, schema: type[T]) -> T | None:
    """The cached answer of the work as a schema instance; None when there is none or it no longer parses."""
    with engine.connect() as conn:
        row = conn.execute(SELECT_CACHE, call.__dict__).first()
    if row is None:
        return None
    try:
        return schema.model_validate(row.response)
    except ValidationError:  # a schema change since then: the old answer is not usable
        return None


def store_answer(engine: Engine, call: LLMCall, parsed: BaseModel) -> None:
    """Cache the work's parsed answer (a newer answer of the same work replaces it)."""
    with engine.begin() as conn:
        conn.execute(INSERT_CACHE, {**call.__dict__, "response": parsed.model_dump_json()})
