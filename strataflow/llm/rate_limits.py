"""Requests per minute per model: a Prefect global concurrency limit with slot decay, taken with rate_limit.

STRATAFLOW_LLM_REQUESTS_PER_MINUTE='{"openai/gpt-4o-mini": 500}' gives that model the limit
`llm-rpm-openai-gpt-4o-mini` (limit 500, slot_decay_per_second 500/60, created on first use, its limit
and decay kept in step with the setting): every request sent takes one slot, which frees itself as the
slot decays, so at most 500 requests start in any minute, over every process and worker of the Prefect
server. It sits beside the `llm` concurrency limit (requests in flight), which is unchanged.

Only inside a Prefect flow or task run: the CLI stages and the API server outside a flow send without it
(a model's own 429s are still retried by the gateway), so they never start a Prefect server to ask.
"""

from __future__ import annotations

import re
import sys
import threading

from strataflow.config import Settings

PREFIX = "llm-rpm-"
_known: dict[str, int] = {}
_lock = threading.Lock()


def limit_name(model: str) -> str:
    """The limit's name for a model: lower case, runs of other characters as one dash."""
    return PREFIX + re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")


def in_prefect_run() -> bool:
    """True inside a Prefect flow or task run (without importing Prefect when nothing has)."""
    context = sys.modules.get("prefect.context")
    if context is None:
        return False
    return bool(context.FlowRunContext.get() or context.TaskRunContext.get())


def ensure_limit(name: str, per_minute: int) -> None:
    """Create the limit (or bring its limit and decay in line with the setting) once per process."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate, GlobalConcurrencyLimitUpdate
    from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

    with _lock:
        if _known.get(name) == per_minute:
            return
        decay = per_minute / 60.0
        with get_client(sync_client=True) as client:
            try:
                current = client.read_global_concurrency_limit_by_name(name)
            except ObjectNotFound:
                try:
                    client.create_global_concurrency_limit(
                        GlobalConcurrencyLimitCreate(name=name, limit=per_minute, slot_decay_per_second=decay)
                    )
                except ObjectAlreadyExists:  # another process created it meanwhile
                    pass
            else:
                if current.limit != per_minute or current.slot_decay_per_second != decay:
                    client.update_global_concurrency_limit(
                        name, GlobalConcurrencyLimitUpdate(limit=per_minute, slot_decay_per_second=decay)
                    )
        _known[name] = per_minute


def wait_for_slot(settings: Settings, model: str, timeout_s: float | None = None) -> None:
    """Before a request to model: take one slot of its requests-per-minute limit (waits while a minute's
    slots are spent; TimeoutError after timeout_s). Nothing when the model has no limit set or outside a
    Prefect run."""
    per_minute = settings.llm_requests_per_minute.get(model)
    if not per_minute or not in_prefect_run():
        return
    from prefect.concurrency.sync import rate_limit

    name = limit_name(model)
    ensure_limit(name, per_minute)
    rate_limit(name, occupy=1, timeout_seconds=timeout_s, strict=True)
