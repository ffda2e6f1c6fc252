"""The incremental flow (prefect.yaml: every 10 minutes): the nightly's stages over new inbox files, sharing
the nightly's watermarks and locks, so neither does the other's work again."""

from __future__ import annotations

from datetime import date
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from models.params import IncrementalParams, NightlyParams

COUNT_RUN_CALLS = text("select count(*) from llm_calls where run_id = :run_id")


def _run(flow: Any, params: Any) -> Any:
    state = flow(params, return_state=True)
    assert state.is_completed(), state.message
    return state.result()


def test_the_incremental_flow_ingests_new_inbox_files_and_the_nightly_then_finds_nothing_to_do(
    prefect_harness: None,
    engine: Engine,
    namespace: str,
    tmp_path: Path,
    write_daily_logs: Any,
    layers: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flows.incremental import incremental
    from flows.nightly import nightly

    inbox = tmp_path / "inbox"
    files = write_daily_logs(inbox, tag=namespace)
    monkeypatch.setenv("STRATAFLOW_INBOX_DIR", str(inbox))  # what the flows' load_settings read

    first = _run(incremental, IncrementalParams(namespace=namespace))
    counts = layers(namespace)
    assert (first.flow, first.status) == ("incremental", "completed")
    assert first.counts.rows_inserted == counts["l1"] == 9 and counts["l1_unembedded"] == 0
    assert first.counts.llm_calls > 0 and first.counts.l2_new > 0 and counts["l2"] > 0
    assert first.counts.hot_summaries > 0 and first.counts.rows_expired == 0  # expiry stays the nightly's

    again = _run(incremental, IncrementalParams(namespace=namespace))
    last_day = date.fromisoformat(files[-1].stem.removeprefix("chat-"))
    night = _run(nightly, NightlyParams(namespace=namespace, run_date=last_day))
    for summary in (again, night):
        assert (summary.counts.rows_inserted, summary.counts.llm_calls, summary.counts.encodes) == (0, 0, 0)
        with engine.connect() as conn:
            assert conn.execute(COUNT_RUN_CALLS, {"run_id": summary.run_id}).scalar_one() == 0
    assert layers(namespace) == counts
