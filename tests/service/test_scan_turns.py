"""Scan turns are work-conserving (issue 49, item 3): one key alone runs a scan on every scan turn of the
process (STRATAFLOW_API_SCAN_PER_KEY bounds it only while others wait), and a second key or namespace that
asks is served at the next free turn, before the first key's queue."""

from __future__ import annotations

import anyio
from sqlalchemy import Engine

from strataflow.config import Settings
from strataflow.service.session import Sessions
from strataflow.service.turns import Limits, Turns
from tests.fixtures.turn_order import TurnOrder


def test_one_key_alone_uses_every_scan_turn_and_a_second_key_or_namespace_is_served_next(
    settings: Settings, engine: Engine
) -> None:
    turns = Sessions(settings.model_copy(update={"api_scan_per_key": 2}), engine).turns
    assert turns.capacity == 3  # a pool of 4: three turns, the fourth connection for light requests

    async def scenario() -> list[str]:
        scans = TurnOrder(turns, "scan")
        order = scans.order
        async with anyio.create_task_group() as tasks:
            for n in range(4):
                await scans.start(tasks, f"a{n}", "ka", "A")
            assert order == ["a0", "a1", "a2"] and turns.held("scan") == 3, order  # alone: all three turns
            await scans.start(tasks, "b0", "kb", "A")  # another key of the same namespace waits behind a3 ...
            await scans.release("a0")
            assert order[-1] == "b0", order  # ... and takes the next free turn before it
            await scans.start(tasks, "c0", "kc", "C")  # another namespace
            await scans.release("a1")
            assert order[-1] == "c0", order  # served next, before the flooding key's a3
            assert "a3" not in order and turns.held("scan") == 3, order
            await scans.release("b0")  # nobody else waits now: a3 may take it (ka holds 1, below its 2)
            assert order[-1] == "a3", order
            scans.release_all()
        return order

    order = anyio.run(scenario)
    assert order == ["a0", "a1", "a2", "b0", "c0", "a3"], order


def test_heavy_turns_lend_nothing() -> None:
    """Heavy work runs for seconds: a key past its heavy turns waits even while others are free."""
    turns = Turns(3, {"scan": Limits(3, 2, 3, lend=True), "heavy": Limits(2, 1, 2)})

    async def scenario() -> bool:
        await turns.take("heavy", "kh", "H", 1.0)
        try:
            await turns.take("heavy", "kh", "H", 0.1)
        except TimeoutError:
            return turns.held("heavy") == 1 and turns.held() == 1
        return False

    assert anyio.run(scenario)
