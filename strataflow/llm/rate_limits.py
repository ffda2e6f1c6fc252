"""Requests per minute per model, where the process runs flows: the gateway asks for a slot before every
request it sends (wait_for_slot).

STRATAFLOW_LLM_REQUESTS_PER_MINUTE='{"openai/gpt-4o-mini": 500}' gives that model the limit
`llm-rpm-openai-gpt-4o-mini` (limit_name): at most 500 requests start in any minute, over every process and
worker of the Prefect server. The limit itself is a Prefect global concurrency limit with slot decay
(tasks/rate_limits.py), which the Prefect side connects with `use_waiter` when it is imported: this module
never imports Prefect (the service sends through the same gateway: pyproject.toml's import contracts).
Outside a flow or task run, and in a process that runs no flows (the CLI stages, the API server), requests
are sent without it; a model's own 429s are still retried by the gateway.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from strataflow.config import Settings

PREFIX = "llm-rpm-"
# (limit name, requests per minute, timeout in seconds) -> returns once a slot is taken (TimeoutError past it)
SlotWaiter = Callable[[str, int, float | None], None]

_waiter: SlotWaiter | None = None


def limit_name(model: str) -> str:
    """The limit's name for a model: lower case, runs of other characters as one dash."""
    return PREFIX + re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")


def use_waiter(waiter: SlotWaiter | None) -> None:
    """Connect the limit's implementation (tasks/rate_limits.py does, in processes that run flows)."""
    global _waiter
    _waiter = waiter


def wait_for_slot(settings: Settings, model: str, timeout_s: float | None = None) -> None:
    """Before a request to model: take one slot of its requests-per-minute limit (waits while a minute's
    slots are spent; TimeoutError after timeout_s). Nothing when the model has no limit set or no waiter is
    connected."""
    per_minute = settings.llm_requests_per_minute.get(model)
    if per_minute and _waiter is not None:
        _waiter(limit_name(model), per_minute, timeout_s)
