"""Extraction through the provider's batch API: `strataflow extract --batch` and the nightly's `llm_batch`.

Three steps around the one extraction (strataflow/pipeline/extract.py), each called by the CLI and by the
flow's tasks alike:

1. `submit_extract_batch`: the requests the extraction would send now (every scope's batches past its
   watermark, built by the same prompt code, with the same cache identity), minus those already answered
   (llm_cache) or waiting in a submitted batch, go to the provider as one batch (strataflow.llm.batch);
2. `wait_for_batches` / `batch_states`: poll until the provider reports every open batch ended (the flow
   polls with task retries, the CLI with a loop and a progress line), each end recorded in llm_batches;
3. `collect_ended_batches`: each batch recorded as ended has its answers read into llm_cache and llm_calls
   at the batch price;
   then `extract_new(..., answers_only=True)` applies them through `apply_extracted`, with the usual locks and
   watermarks. A scope whose answer is missing (a request that failed, a batch that expired) is deferred:
   counted in the result, named in its errors, its watermark left where it was, and sent by the next run.

A scope's later batches are built with the keys it had when the batch was submitted (the synchronous path
lists the keys the earlier batches just wrote); the cache identity of a batch of messages is the same either
way (its message ids and content hashes), so an answer is used whichever path asked for it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from models.llm import ExtractionOutput
from models.params import EVERY_SCOPE, Shard
from strataflow.config import Settings
from strataflow.db.engine import engine_for, ledger_engine_for
from strataflow.errors import UserError
from strataflow.llm import lazy
from strataflow.llm.batch import (
    BatchCollected,
    BatchRequest,
    BatchState,
    collect,
    ended_batches,
    open_batches,
    pending_hashes,
    refresh,
    submit,
    supports_batches,
)
from strataflow.llm.ledger import cached_answer
from strataflow.pipeline.extract import existing_keys, scope_work, scopes_to_extract
from strataflow.pipeline.extract_prompt import STAGE, answer_context, batch_cache_key, extract_prompt
from strataflow.pipeline.stage_loop import stage_gateway


def batch_model(settings: Settings) -> str:
    """The extraction model, when the provider behind it has a batch API; a clear error otherwise."""
    model = settings.extract_model
    if not supports_batches(model):
        raise UserError(
            f"STRATAFLOW_EXTRACT_MODEL={model} has no batch API strataflow can drive: batches go through an "
            "OpenAI-compatible API (openai/<model>, with STRATAFLOW_LLM_API_BASE for another server); "
            "run without --batch / llm_batch"
        )
    return model


def extract_batch_requests(
    settings: Settings, namespace: str | None = None, shard: Shard = EVERY_SCOPE
) -> list[BatchRequest]:
    """The requests the extraction would send now, minus those answered or waiting in a batch already."""
    engine, ledger = engine_for(settings), ledger_engine_for(settings)
    model = batch_model(settings)
    gateway = stage_gateway(settings, None)
    litellm = lazy.litellm()
    waiting = pending_hashes(settings, engine, STAGE, model)
    prompt = extract_prompt(settings)
    requests: list[BatchRequest] = []
    with engine.connect() as conn:
        for scope in scopes_to_extract(conn, namespace, shard):
            work = scope_work(conn, scope, prompt.batch_tokens(settings), model, None, prompt.version)
            keys = existing_keys(conn, scope.namespace, scope.subject_id)
            for batch in work.batches:
                messages = prompt.messages(batch, keys)
                call = gateway.call_for(
                    STAGE, prompt.version, messages, prompt.schema, scope.namespace, scope.subject_id,
                    batch_cache_key(batch),
                )  # fmt: skip
                if call.input_hash in waiting or cached_answer(ledger, call, prompt.schema) is not None:
                    continue
                body = gateway.request_body(litellm, model, messages, prompt.schema_for(batch))
                event_at = max(m.event_at for m in batch)
                requests.append(BatchRequest(call, body, event_at, answer_context(batch)))
    return requests


def submit_extract_batch(
    settings: Settings, run_id: uuid.UUID | None, namespace: str | None = None, shard: Shard = EVERY_SCOPE
) -> tuple[str | None, int]:
    """Submit the extraction's pending requests as one provider batch: (its id, or None when there is
    nothing to send; the number of requests)."""
    requests = extract_batch_requests(settings, namespace, shard)
    if not requests:
        return None, 0
    batch_id = submit(settings, engine_for(settings), run_id, STAGE, batch_model(settings), requests)
    return batch_id, len(requests)


def batch_states(settings: Settings) -> list[BatchState]:
    """What the provider says of every extraction batch not collected yet (recorded as it goes)."""
    engine = engine_for(settings)
    model = batch_model(settings)
    return [refresh(settings, engine, batch_id) for batch_id in open_batches(settings, engine, STAGE, model)]


def wait_for_batches(
    settings: Settings,
    poll_s: float,
    timeout_s: float,
    on_poll: Callable[[list[BatchState]], None] | None = None,
) -> list[BatchState]:
    """Poll every open extraction batch until each has ended or timeout_s has passed; their last states
    (one still running after the timeout is left for the next run)."""
    deadline = time.monotonic() + timeout_s
    while True:
        states = batch_states(settings)
        if on_poll is not None:
            on_poll(states)
        if all(state.ended for state in states) or time.monotonic() + poll_s > deadline:
            return states
        time.sleep(poll_s)


def collect_ended_batches(settings: Settings) -> list[BatchCollected]:
    """Collect every extraction batch whose end the last poll recorded into llm_cache and llm_calls (no
    second round trip to the provider: wait_for_batches or the flow's wait task has just asked it)."""
    engine, ledger = engine_for(settings), ledger_engine_for(settings)
    ended = ended_batches(settings, engine, STAGE, batch_model(settings))
    return [collect(settings, engine, ledger, batch_id, ExtractionOutput) for batch_id in ended]


def waiting_batches(settings: Settings) -> int:
    """Extraction batches not collected yet (after collect_ended_batches: those still running)."""
    return len(open_batches(settings, engine_for(settings), STAGE, batch_model(settings)))
