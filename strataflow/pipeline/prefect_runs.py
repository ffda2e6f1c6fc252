"""The run recorder's Prefect side: the one module of the stage library that imports Prefect (pyproject.toml's
import contracts), connected by the processes that run flows (tasks/__init__.py, `strataflow serve`) with
`install`; the service and every stage never import it.

- run_logger: Prefect's logger of the current flow or task run, so a stage's lines show in the run's log in
  the UI (strataflow.pipeline.runs.stage_logger); None outside a run.
- crash_in_prefect: a flow run whose process died (strataflow.pipeline.runs.mark_crashed found it) is set
  Crashed in Prefect too, where a process killed with SIGKILL could not report it.
"""

from __future__ import annotations

import logging
import uuid

from prefect.client.orchestration import get_client
from prefect.exceptions import MissingContextError
from prefect.logging import get_run_logger
from prefect.states import Crashed

from strataflow.pipeline import runs

logger = logging.getLogger(__name__)


def install() -> None:
    """Connect the run logger and the crashed-state mirror to strataflow.pipeline.runs."""
    runs.use_prefect(run_logger, crash_in_prefect)


def run_logger() -> runs.AnyLogger | None:
    try:
        return get_run_logger()
    except MissingContextError:
        return None


def crash_in_prefect(flow_run_ids: list[uuid.UUID]) -> int:
    """Set these Prefect flow runs Crashed (forced: their process died without reporting) unless they already
    ended; how many were set. Never raises: the pipeline_runs row is the record, Prefect's state a mirror."""
    if not flow_run_ids:
        return 0
    marked = 0
    try:
        with get_client(sync_client=True) as client:
            for flow_run_id in flow_run_ids:
                try:
                    state = client.read_flow_run(flow_run_id).state
                    if state is not None and state.is_final():
                        continue
                    message = "the process that ran it died without closing the run (marked by strataflow)"
                    client.set_flow_run_state(flow_run_id, Crashed(message=message), force=True)
                    marked += 1
                except Exception as exc:  # noqa: BLE001 (a run of another Prefect server, the API away)
                    logger.warning("could not mark flow run %s Crashed in Prefect: %s", flow_run_id, exc)
    except Exception as exc:  # noqa: BLE001 (no Prefect API reachable from here)
        logger.warning("could not reach Prefect to mark crashed runs: %s", exc)
    return marked
