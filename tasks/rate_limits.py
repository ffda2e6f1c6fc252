"""Models' requests per minute as Prefect global concurrency limits with slot decay, taken with rate_limit
inside flow and task runs (strataflow/llm/rate_limits.py asks, once `install` connected this).

A limit of N a minute is `llm-rpm-<model>` (limit N, slot_decay_per_second N/60, created on first use, its
limit and decay kept in step with the setting): every request sent takes one slot, which frees itself as the
slot decays. It sits beside the `llm` concurrency limit (requests in flight, tasks/concurrency.py).
"""

from __future__ import annotations

import threading

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate, GlobalConcurrencyLimitUpdate
from prefect.concurrency.sync import rate_limit
from prefect.context import FlowRunContext, TaskRunContext
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

from strataflow.llm import rate_limits

_known: dict[str, int] = {}
_lock = threading.Lock()


def install() -> None:
    rate_limits.use_waiter(wait_for_slot)


def in_prefect_run() -> bool:
    return bool(FlowRunContext.get() or TaskRunContext.get())


def wait_for_slot(name: str, per_minute: int, timeout_s: float | None) -> None:
    """One slot of the limit, inside a flow or task run (outside one: nothing, never a Prefect server)."""
    if not in_prefect_run():
        return
    ensure_limit(name, per_minute)
    rate_limit(name, occupy=1, timeout_seconds=timeout_s, strict=True)


def ensure_limit(name: str, per_minute: int) -> None:
    """Create the limit (or bring its limit and decay in line with the setting) once per process."""
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
