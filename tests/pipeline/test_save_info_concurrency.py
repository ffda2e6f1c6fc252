"""One connection per unit of work: concurrent save_info calls, each holding a connection of the request pool
as an API request does, all finish. The LLM gateway's cache and ledger use their own small pool
(strataflow.db.engine.ledger_engine_for), never a second checkout from the caller's pool (which deadlocked
four concurrent calls for the pool's 30 s timeout)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from sqlalchemy import Engine, text

from strataflow.config import Settings
from strataflow.db.engine import MAX_OVERFLOW, POOL_SIZE
from strataflow.pipeline.save_info import save_exchange

LEDGER = text("select count(*) from llm_calls where namespace = :ns and stage = 'extract'")


def test_pool_size_plus_overflow_plus_two_concurrent_save_info_calls_all_finish(
    engine: Engine, settings: Settings, namespace: str
) -> None:
    callers = POOL_SIZE + MAX_OVERFLOW + 2
    assert engine.pool.size() == POOL_SIZE

    def one_exchange(number: int) -> int:
        with engine.begin() as conn:  # held for the whole call, as a request's transaction is
            saved = save_exchange(
                conn,
                settings,
                namespace,
                f"caller-{number}",
                f"I live in city number {number} and work as a baker.",
            )
            return saved.llm_calls

    with ThreadPoolExecutor(max_workers=callers) as pool:
        sent = list(pool.map(one_exchange, range(callers), timeout=120))
    assert sent == [1] * callers  # each exchange went to the model once, none was refused or timed out
    with engine.connect() as conn:
        assert conn.execute(LEDGER, {"ns": namespace}).scalar() == callers
