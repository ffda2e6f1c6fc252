"""STRATAFLOW_TASK_RUNNER=dask: the nightly flow's extraction runs on two local Dask worker processes and
writes the same L2 items as the default runner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from models.params import NightlyParams

SELECT_ITEMS = text(
    """
    select subject_id, kind, key, value, statement from memory_items
    where namespace = :ns and kind <> 'hot_summary' and status = 'active'
    order by subject_id, kind, key
    """
)


def _items(engine: Engine, namespace: str) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(SELECT_ITEMS, {"ns": namespace})]


def test_extraction_over_two_dask_workers_gives_the_same_l2_items_as_the_default_runner(
    prefect_harness: None,
    engine: Engine,
    tmp_path: Path,
    write_logs: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flows.nightly import nightly
    from strataflow.config import load_settings
    from strataflow.ops.flow_runner import with_runner

    write_logs(tmp_path / "logs")
    default_ns, dask_ns = "t_default_" + tmp_path.name[-8:], "t_dask_" + tmp_path.name[-8:]
    state = nightly(NightlyParams(paths=[str(tmp_path / "logs")], namespace=default_ns), return_state=True)
    assert state.is_completed(), state.message

    monkeypatch.setenv("STRATAFLOW_TASK_RUNNER", "dask")
    monkeypatch.setenv("STRATAFLOW_DASK_WORKERS", "2")
    dask_nightly = with_runner(nightly, load_settings())
    assert type(dask_nightly.task_runner).__name__ == "DaskTaskRunner"
    state = dask_nightly(NightlyParams(paths=[str(tmp_path / "logs")], namespace=dask_ns), return_state=True)
    assert state.is_completed(), state.message
    summary = state.result()

    assert summary.stages["extract"]["scopes"] + summary.stages["extract"]["scopes_locked"] >= 2
    assert _items(engine, dask_ns) == _items(engine, default_ns) != []
