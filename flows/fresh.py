"""The fresh flow: memory within two minutes of a posted message, as Prefect runs.

An accepted online write (POST /v1/messages, mem0 add) emits the Prefect event `strataflow.messages.received`
with the namespace as its resource (strataflow/ops/freshness.py). The `fresh` deployment of prefect.yaml has
an event trigger on it with one bucket per namespace: the first event of a namespace creates a run for it at
once; the events of the next few seconds (the trigger's `within`, shorter than a run takes to start, so the
run reads their messages) create nothing more.

Gathering: the deployment runs one at a time (`concurrency_limit: 1`). A run that starts takes over the
namespaces of the runs still waiting (scheduled, or awaiting the slot), cancelling them with a message naming
itself, so fifty namespaces posting at once cost one flow run, not fifty processes. A waiting run that
cannot be cancelled (it is starting) runs by itself and finds little to do.

For each namespace the run extracts L2 from exactly the scopes with messages past their extraction
watermark (the ones that received messages), refreshes their hot memory, then embeds the new items,
one namespace after the other. The stage functions are the ones the nightly's and the incremental's tasks
call, so they share the per-scope locks and watermarks: no message is extracted twice, whichever flow comes
first.
"""

from __future__ import annotations

import uuid
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows.tracing import trace_flow_runs
from models.params import RunSummary
from strataflow.config import Settings, load_settings
from strataflow.ops.flow_runner import configured_task_runner
from strataflow.pipeline.extract import extract_new
from strataflow.pipeline.hot_memory import refresh_hot_memory
from strataflow.pipeline.runs import raise_if_all_failed
from tasks.bookkeeping import begin_run, finish_run, mark_run_failed
from tasks.concurrency import llm_slot
from tasks.embed import embed_pending_task

trace_flow_runs()  # before Prefect opens a run's span: one trace per flow run (flows/tracing.py)

GATHER_LIMIT = 200  # the most runs the Prefect API lists at once


def gather_waiting(namespace: str | None) -> list[str | None]:
    """namespace and those of this deployment's other runs still waiting, which are cancelled (taken over by
    this run); [None] (every namespace) when any of them is a catch-up run. Outside a deployment (a test,
    `strataflow run`), or when the Prefect API cannot say, only namespace."""
    from prefect import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterDeploymentId,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.client.schemas.responses import SetStateStatus
    from prefect.runtime import deployment, flow_run
    from prefect.states import Cancelled

    namespaces: list[str | None] = [namespace]
    if deployment.id is None:
        return namespaces
    waiting = FlowRunFilter(
        deployment_id=FlowRunFilterDeploymentId(any_=[deployment.id]),
        state=FlowRunFilterState(type=FlowRunFilterStateType(any_=[StateType.SCHEDULED])),
    )
    try:
        with get_client(sync_client=True) as client:
            for run in client.read_flow_runs(flow_run_filter=waiting, limit=GATHER_LIMIT):
                other = run.parameters.get("namespace")
                if str(run.id) == str(flow_run.id) or not (other is None or isinstance(other, str)):
                    continue
                gathered: Any = Cancelled(message=f"gathered into fresh run {flow_run.id}")
                done = client.set_flow_run_state(run.id, gathered)
                if done.status == SetStateStatus.ACCEPT and other not in namespaces:
                    namespaces.append(other)
    except Exception as exc:  # gathering saves processes; a run without it is still right
        get_run_logger().warning("could not gather the waiting fresh runs: %s", exc)
    return [None] if None in namespaces else namespaces


@task(name="fresh-namespaces", cache_policy=NO_CACHE)
def fresh_namespaces(
    settings: Settings, run_id: uuid.UUID, namespaces: list[str | None]
) -> dict[str, list[Any]]:
    """Extraction then hot memory, one namespace after the other (each holds its database connections while it
    works; one at a time keeps a run of fifty namespaces within the pool). Raises when every scope of every
    namespace failed (the stages' failure policy)."""
    stages: dict[str, list[Any]] = {"extract": [], "hot_memory": []}
    for namespace in namespaces:
        stages["extract"].append(extract_new(settings, run_id=run_id, namespace=namespace, progress=False))
        stages["hot_memory"].append(refresh_hot_memory(settings, run_id=run_id, namespace=namespace))
    for stage, results in stages.items():
        if results and all(result.all_failed() for result in results):
            raise_if_all_failed(results[0], stage)
    return stages


@flow(
    name="fresh",
    task_runner=configured_task_runner(),
    on_failure=[mark_run_failed],
    on_crashed=[mark_run_failed],
)
def fresh(namespace: str | None = None) -> RunSummary:
    """Extract L2 and refresh hot memory for the scopes that received messages in namespace (and in the
    namespaces of the waiting runs it gathers; every namespace when None: the catch-up run `strataflow serve`
    starts once its trigger is registered); embed the new items."""
    settings = load_settings()
    namespaces = gather_waiting(namespace)
    run_id = begin_run(settings, "fresh", {"namespace": namespace, "namespaces": namespaces})
    with llm_slot(settings):
        stages = fresh_namespaces(settings, run_id, namespaces)
    only = namespaces[0] if len(namespaces) == 1 else None
    stages["embed"] = [embed_pending_task(settings, namespace=only)]
    return finish_run(settings, "fresh", run_id, stages)
