"""The fresh flow (prefect.yaml: on strataflow.messages.received): L2 and hot memory for the namespace that
received messages, sharing the incremental's watermarks, so neither does the other's work again. The event
and its trigger: tests/service/test_fresh_events.py, tests/flows/test_flows.py and the realmodel check C."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, text

from models.params import IncrementalParams

COUNT_ITEMS = text("select count(*) from memory_items where namespace = :ns and kind <> 'hot_summary'")


def _completed(state: Any) -> Any:
    assert state.is_completed(), state.message
    return state.result()


def test_a_fresh_run_extracts_its_namespace_and_the_incremental_then_finds_it_done(
    prefect_harness: None, engine: Engine, namespace: str, load: Any
) -> None:
    from flows.fresh import fresh
    from flows.incremental import incremental

    load({"vet": ["I work as a veterinarian in Porto and I have two dogs."]}, extract=False)

    summary = _completed(fresh(namespace, return_state=True))

    assert (summary.flow, summary.status) == ("fresh", "completed")
    assert summary.counts.l2_new > 0 and summary.counts.hot_summaries == 1
    with engine.connect() as conn:
        assert conn.execute(COUNT_ITEMS, {"ns": namespace}).scalar_one() == summary.counts.l2_new
    again = _completed(incremental(IncrementalParams(namespace=namespace), return_state=True))
    assert (again.counts.llm_calls, again.counts.l2_new) == (0, 0), "the watermarks are shared"
