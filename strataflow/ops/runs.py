"""pipeline_runs: one row per flow run or CLI stage run, with its counts and final state."""

from __future__ import annotations

import json
import uuid
from typing import Any

from sqlalchemy import Engine, text

INSERT_RUN = text(
    """
    insert into pipeline_runs (run_id, flow, namespace, prefect_flow_run_id, parameters)
    values (:run_id, :flow, :namespace, :prefect_flow_run_id, cast(:parameters as jsonb))
    """
)
FINISH_RUN = text(
    """
    update pipeline_runs
    set status = :status, counts = cast(:counts as jsonb), error = :error, finished_at = now()
    where run_id = :run_id
    """
)


def start_run(
    engine: Engine,
    flow: str,
    parameters: dict[str, Any] | None = None,
    namespace: str | None = None,
    prefect_flow_run_id: str | uuid.UUID | None = None,
) -> uuid.UUID:
    """Record a started run (committed at once, so a crash still leaves a trace) and return its id."""
    run_id = uuid.uuid4()
    with engine.begin() as conn:
        conn.execute(
            INSERT_RUN,
            {
                "run_id": run_id,
                "flow": flow,
                "namespace": namespace,
                "prefect_flow_run_id": prefect_flow_run_id,
                "parameters": json.dumps(parameters or {}, default=str),
            },
        )
    return run_id


def finish_run(
    engine: Engine,
    run_id: uuid.UUID,
    status: str,
    counts: dict[str, Any] | None = None,
    error: str | None = None,
) -> None:
    """Close a run: completed, failed or budget_stopped, with its counts."""
    with engine.begin() as conn:
        conn.execute(
            FINISH_RUN,
            {
                "run_id": run_id,
                "status": status,
                "counts": json.dumps(counts or {}, default=str),
                "error": error,
            },
        )
