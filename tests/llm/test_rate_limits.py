"""Requests per minute per model: a Prefect global concurrency limit with slot decay, taken with rate_limit
inside flow runs (the session's real Prefect test server)."""

from __future__ import annotations

import pytest

from strataflow.config import Settings
from strataflow.llm import rate_limits
from tasks import rate_limits as prefect_limits  # importing tasks connects the limits (tasks/__init__.py)


def test_a_models_requests_per_minute_become_a_decaying_limit_that_throttles_inside_a_run(
    prefect_harness: None, settings: Settings
) -> None:
    from prefect import flow
    from prefect.client.orchestration import get_client

    limited = settings.model_copy(update={"llm_requests_per_minute": {"test/Model-A.1": 2}})
    name = rate_limits.limit_name("test/Model-A.1")
    assert name == "llm-rpm-test-model-a-1"

    @flow
    def three_requests() -> str:
        rate_limits.wait_for_slot(limited, "test/Model-A.1")
        rate_limits.wait_for_slot(limited, "test/Model-A.1")
        rate_limits.wait_for_slot(limited, "other/model")  # no limit set: never waits
        try:
            rate_limits.wait_for_slot(limited, "test/Model-A.1", timeout_s=2)
        except TimeoutError:
            return "throttled"
        return "sent"

    assert three_requests() == "throttled"  # two a minute: the third waits about 30 s for a slot to decay
    with get_client(sync_client=True) as client:
        limit = client.read_global_concurrency_limit_by_name(name)
        names = [gcl.name for gcl in client.read_global_concurrency_limits(limit=200)]
    assert (limit.limit, limit.slot_decay_per_second) == (2, pytest.approx(2 / 60))
    assert limit.active_slots >= 1
    assert rate_limits.limit_name("other/model") not in names


def test_outside_a_prefect_run_nothing_is_asked_of_prefect(settings: Settings) -> None:
    limited = settings.model_copy(update={"llm_requests_per_minute": {"test/outside": 1}})
    for _ in range(3):  # a limit of one a minute would block the second call inside a run
        rate_limits.wait_for_slot(limited, "test/outside", timeout_s=1)
    assert not prefect_limits.in_prefect_run()
