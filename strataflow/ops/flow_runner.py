"""The one way to run a flow in this process: Prefect's environment, loading a flow and its parameter model,
the task runner, one run (`run_flow`, used by `strataflow run` and the demo).

Prefect is imported only inside these functions so the CLI starts fast.
"""

from __future__ import annotations

import os
from importlib import import_module
from typing import Any

from pydantic import BaseModel, ValidationError

from models.params import (
    AnalyticsParams,
    AssetsParams,
    BackfillParams,
    IncrementalParams,
    NightlyParams,
    RunSummary,
    WeeklyParams,
)
from strataflow.config import Settings
from strataflow.errors import UserError

PARAMS: dict[str, type[BaseModel]] = {
    "nightly": NightlyParams,
    "weekly": WeeklyParams,
    "incremental": IncrementalParams,
    "assets": AssetsParams,
    "backfill": BackfillParams,
    "analytics": AnalyticsParams,
}
FLOWS = tuple(PARAMS)
STAGE_OWNERS = {
    "tasks.ingest": "ingest (strataflow/pipeline/ingest.py)",
    "tasks.embed": "embedding (strataflow/pipeline/embed.py)",
    "tasks.assets": "asset ingest (strataflow/pipeline/assets.py)",
    "tasks.extract": "extraction (strataflow/pipeline/extract.py)",
    "tasks.rollup": "weekly rollup (strataflow/pipeline/rollup.py)",
    "tasks.reflect": "reflection (strataflow/pipeline/reflect.py)",
    "tasks.expire": "expiry (strataflow/pipeline/expire.py)",
}


def prefect_environment(settings: Settings) -> dict[str, str]:
    """Prefect's variables for this process and the ones it starts: a PREFECT_HOME under STRATAFLOW_HOME
    (unless one is set), no telemetry, a startup timeout that fits a busy machine. Returns the environment."""
    defaults = {
        "PREFECT_HOME": str(settings.home / "prefect"),
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "180",
        "HF_HUB_OFFLINE": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    for name, value in defaults.items():
        os.environ.setdefault(name, value)
    return dict(os.environ)


def load_flow(name: str) -> Any:
    """The flow object flows/<name>.py defines; a missing stage module is a clear error, not a traceback."""
    if name not in FLOWS:
        raise UserError(f"unknown flow {name!r}; choose one of {', '.join(FLOWS)}")
    try:
        module = import_module(f"flows.{name}")
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing in STAGE_OWNERS or missing.startswith("tasks."):
            stage = STAGE_OWNERS.get(missing, missing)
            raise UserError(
                f"the {name} flow needs the {stage} stage, not in this checkout ({missing} is missing)"
            ) from None
        raise
    except ImportError as exc:
        raise UserError(f"the {name} flow cannot load one of its stages: {exc}") from None
    return getattr(module, name)


def task_runner(settings: Settings) -> Any | None:
    """A DaskTaskRunner when STRATAFLOW_TASK_RUNNER=dask (local cluster or DASK_ADDRESS), else None."""
    if settings.task_runner != "dask":
        return None
    try:
        from prefect_dask.task_runners import DaskTaskRunner
    except ImportError:
        raise UserError("STRATAFLOW_TASK_RUNNER=dask needs prefect-dask: pip install -e '.[dask]'") from None
    if settings.dask_address:
        return DaskTaskRunner(address=settings.dask_address)
    return DaskTaskRunner(
        cluster_kwargs={"n_workers": settings.dask_workers, "threads_per_worker": 1, "processes": True}
    )


def configured_task_runner() -> Any:
    """The task runner the flows are declared with: a thread pool whose `duplicate` (what Prefect calls when
    a flow run starts) returns the runner the settings of that moment ask for. So a deployment's flow run
    honours STRATAFLOW_TASK_RUNNER and STRATAFLOW_DASK_ADDRESS from its work pool's environment, and
    nothing is read when the flow module is imported."""
    from prefect.task_runners import ThreadPoolTaskRunner

    class SettingsTaskRunner(ThreadPoolTaskRunner):  # type: ignore[type-arg]
        def duplicate(self) -> Any:
            from strataflow.config import load_settings

            return task_runner(load_settings()) or ThreadPoolTaskRunner()

    return SettingsTaskRunner()


def with_runner(flow: Any, settings: Settings) -> Any:
    """The flow with the task runner the settings ask for."""
    runner = task_runner(settings)
    return flow if runner is None else flow.with_options(task_runner=runner)


def build_params(model: type[BaseModel], values: dict[str, Any]) -> BaseModel:
    """Validate CLI values into a parameter model; a bad value names the parameter."""
    try:
        return model(**{key: value for key, value in values.items() if value is not None})
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'parameters'}: {error['msg']}"
            for error in exc.errors()
        )
        raise UserError(f"invalid parameters: {problems}") from None


class FlowRunFailed(UserError):
    """A flow run ended in a state other than Completed; the message has Prefect's state message."""


def run_flow(settings: Settings, name: str, params: BaseModel) -> RunSummary:
    """Run one flow in this process against the configured Prefect API (ephemeral when none is set) and
    return its summary; a run that does not complete raises FlowRunFailed."""
    prefect_environment(settings)
    flow = with_runner(load_flow(name), settings)
    state = flow(params, return_state=True)
    if not state.is_completed():
        raise FlowRunFailed(f"the {name} run ended {state.name}: {state.message or 'see the Prefect log'}")
    summary: RunSummary = state.result()
    return summary
