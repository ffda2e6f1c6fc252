"""The run recorder: one pipeline_runs row per flow run or CLI stage run, with its counts and final state.

Every way of running work records it here: the flows (tasks/bookkeeping.py's begin-run task calls start_run,
its finish-run task run_summary.close_run; the flows' failure hook calls fail_flow_run), the CLI commands and
a stand-alone ingest (record_run). The final state follows one policy (run_status):

- failed: the work raised, or an LLM stage attempted units and every one of them failed;
- completed_with_errors: some units of an LLM stage failed, the others were done;
- budget_stopped: the LLM budget ran out (clean stop; the next run resumes);
- completed: everything asked was done (quarantined records are counted, not failures);
- crashed: the process died before it could close the run. Each run records its host, process id and the
  process's start time; the next run of the same flow on that host marks a 'running' run whose process is
  gone as crashed (start_run), and so does `strataflow serve`'s reaper for every flow (reap_crashed), so no
  run stays 'running' forever. In a process that runs flows, a crashed flow run is marked Crashed in Prefect
  too (strataflow.pipeline.prefect_runs, connected by use_prefect), where a process killed with SIGKILL could
  not report it: its flow run would otherwise show Running for good.

This module never imports Prefect (the service records runs through it: pyproject.toml's import contracts).
What a flow run adds, the run's own log in Prefect's UI and the crashed state mirrored there, comes from
strataflow.pipeline.prefect_runs, which the Prefect side (tasks/, `strataflow serve`) connects with
`use_prefect`; elsewhere the stages log to their module's logger.

Errors that name a scope name it by `scope_ref` (namespace and a short sha256 of namespace + subject id,
the hash `strataflow forget` reports), never by the subject id: pipeline_runs must not keep a trace of a
forgotten subject. An error that ends a run is recorded by `recorded_error`: its class, and its message
only when the project wrote it without user text (UserError, and LLMError, whose provider part
strataflow.llm.gateway.provider_error reduces to class, HTTP status and a reference); a driver's or a
library's message may quote a row or a request, so it is not kept (a database error keeps its SQLSTATE).
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import BaseModel
from sqlalchemy import Engine, text

from models.results import LLMStageResult
from strataflow.errors import UserError
from strataflow.hashes import subject_hash
from strataflow.llm.gateway import LLMError

R = TypeVar("R")
AnyLogger = logging.Logger | logging.LoggerAdapter[logging.Logger]
RunLogger = Callable[[], AnyLogger | None]  # the current flow or task run's logger, None outside a run
CrashMirror = Callable[[list[uuid.UUID]], int]  # marks these orchestrator flow runs crashed; how many

_run_logger: RunLogger | None = None
_crash_mirror: CrashMirror | None = None

CRASHED = "crashed"
COMPLETED = "completed"
COMPLETED_WITH_ERRORS = "completed_with_errors"
BUDGET_STOPPED = "budget_stopped"
FAILED = "failed"
ERROR_CHARS = 2000
# Result fields that name subjects: kept in the result (the CLI prints them), never written to pipeline_runs.
PRIVATE_FIELDS = frozenset({"manual_conflicts", "errors", "problems", "run_id"})

INSERT_RUN = text(
    """
    insert into pipeline_runs (run_id, flow, namespace, prefect_flow_run_id, parameters, host, pid,
                               process_started_at)
    values (:run_id, :flow, :namespace, :prefect_flow_run_id, cast(:parameters as jsonb), :host, :pid,
            :process_started_at)
    """
)
SELECT_RUNNING = text(
    """
    select run_id, pid, process_started_at, prefect_flow_run_id from pipeline_runs
    where (flow = cast(:flow as text) or cast(:flow as text) is null)
        and status = 'running' and host = :host and pid is not null
    """
)
MARK_CRASHED = text(
    f"""
    update pipeline_runs
    set status = '{CRASHED}', finished_at = now(),
        error = 'the process that ran it (pid ' || pid || ' on ' || host || ') ended without closing the run'
    where run_id = any(cast(:run_ids as uuid[])) and status = 'running'
    """
)
FINISH_RUN = text(
    """
    update pipeline_runs
    set status = :status, counts = cast(:counts as jsonb), error = :error, finished_at = now()
    where run_id = :run_id
    """
)
FAIL_FLOW_RUN = text(
    """
    update pipeline_runs
    set status = :status, error = :error, finished_at = now()
    where prefect_flow_run_id = :flow_run_id and status = 'running'
    returning run_id
    """
)
SELECT_PREVIOUS_STATE = text(
    """
    select p.status from pipeline_runs as p
    join pipeline_runs as this on this.run_id = :run_id
    where p.flow = this.flow and p.run_id <> this.run_id and p.status <> 'running'
        and p.started_at < this.started_at
        and p.namespace is not distinct from this.namespace
    order by p.started_at desc
    limit 1
    """
)
# A run over every namespace: one pipeline_run_namespaces row per namespace it worked in (sql/330).
ATTRIBUTE_RUN = text("select strataflow_attribute_run(:run_id, cast(:given as jsonb))")


class StageFailed(RuntimeError):
    """Every unit an LLM stage attempted failed: the task raises this so its flow run fails."""


def scope_ref(namespace: str, subject_id: str) -> str:
    """How run records and logs name a scope: the namespace and sha256(namespace NUL subject_id)[:12]."""
    return f"{namespace}/sha256:{subject_hash(namespace, subject_id)[:12]}"


def use_prefect(run_logger: RunLogger, crash_mirror: CrashMirror) -> None:
    """Connect what a process that runs flows adds (strataflow.pipeline.prefect_runs.install calls this):
    the run's logger for stage_logger, and the orchestrator's crashed state for mark_crashed."""
    global _run_logger, _crash_mirror
    _run_logger, _crash_mirror = run_logger, crash_mirror


def stage_logger(name: str) -> AnyLogger:
    """The flow or task run's logger inside a run (its lines show in the run's log in Prefect's UI, where
    use_prefect connected it), else the module's logger."""
    found = _run_logger() if _run_logger is not None else None
    return found if found is not None else logging.getLogger(name)


def raise_if_all_failed(result: LLMStageResult, stage: str) -> None:
    """The task-level half of the failure policy: a stage whose every attempted unit failed raises."""
    if result.all_failed():
        raise StageFailed(
            f"{stage}: all {result.units_failed} unit(s) failed: " + "; ".join(result.errors)[:ERROR_CHARS]
        )


def namespace_counts(results: Iterable[Any]) -> dict[str, dict[str, float]]:
    """What the results counted per namespace (their `by_namespace` fields), summed over the results."""
    merged: dict[str, dict[str, float]] = {}
    for result in results:
        for namespace, counts in (_fields(result).get("by_namespace") or {}).items():
            if not isinstance(counts, Mapping):
                continue
            into = merged.setdefault(str(namespace), {})
            for key, value in counts.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    into[key] = into.get(key, 0) + value
    return merged


def _fields(result: Any) -> Mapping[str, Any]:
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json")
    return result if isinstance(result, Mapping) else {}


def run_status(results: Iterable[Any]) -> str:
    """The final state of a run from its stage results (models or their dumped dicts)."""
    results = list(results)
    if any(isinstance(r, LLMStageResult) and r.all_failed() for r in results):
        return FAILED
    fields = [_fields(r) for r in results]
    if any(f.get("units_failed") or f.get("errors") for f in fields):
        return COMPLETED_WITH_ERRORS
    if any(f.get("budget_stopped") for f in fields):
        return BUDGET_STOPPED
    return COMPLETED


def stage_errors(results: Iterable[Any]) -> list[str]:
    """The errors the stage results carry (scopes named by hash), in order."""
    return [str(error) for result in results for error in (_fields(result).get("errors") or [])]


def run_counts(result: Any) -> dict[str, Any]:
    """What pipeline_runs.counts keeps of a result: its fields less the ones that name subjects."""
    return {key: value for key, value in _fields(result).items() if key not in PRIVATE_FIELDS}


def this_process() -> tuple[str, int, datetime]:
    """(host, pid, start time) of this process: what a run row records of the process that runs it."""
    import psutil

    started = datetime.fromtimestamp(psutil.Process().create_time(), UTC)
    return socket.gethostname(), os.getpid(), started


def process_alive(pid: int, started: datetime | None) -> bool:
    """True when the process with this id runs and is the one that started then (ids are reused)."""
    import psutil

    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        created = process.create_time()
    except psutil.Error:
        return False
    return started is None or abs(created - started.timestamp()) < 1.0


def mark_crashed(engine: Engine, flow: str | None) -> list[uuid.UUID]:
    """Mark the 'running' runs of this flow (None: of every flow) on this host whose process is gone as
    crashed, in pipeline_runs and, where use_prefect connected it, in Prefect; their ids."""
    host, _, _ = this_process()
    with engine.begin() as conn:
        rows = conn.execute(SELECT_RUNNING, {"flow": flow, "host": host}).all()
        dead = [row for row in rows if not process_alive(row.pid, row.process_started_at)]
        if dead:
            conn.execute(MARK_CRASHED, {"run_ids": [row.run_id for row in dead]})
            for row in dead:  # what a crashed run over every namespace did, as far as it left traces
                conn.execute(ATTRIBUTE_RUN, {"run_id": row.run_id, "given": "{}"})
    if _crash_mirror is not None:
        _crash_mirror([row.prefect_flow_run_id for row in dead if row.prefect_flow_run_id is not None])
    return [row.run_id for row in dead]


def reap_crashed(engine: Engine) -> list[uuid.UUID]:
    """The reaper (`strataflow serve` calls it every minute): mark every flow's runs of this host whose
    process is gone as crashed, also of a flow that does not run again soon (a killed backfill); their ids."""
    dead = mark_crashed(engine, None)
    for run_id in dead:
        logging.getLogger(__name__).warning("run %s had crashed: marked crashed", run_id)
    return dead


def start_run(
    engine: Engine,
    flow: str,
    parameters: dict[str, Any] | None = None,
    namespace: str | None = None,
    prefect_flow_run_id: str | uuid.UUID | None = None,
) -> uuid.UUID:
    """Record a started run (committed at once, so a crash still leaves a trace) and return its id; first,
    the flow's earlier runs whose process died are marked crashed (mark_crashed)."""
    for crashed in mark_crashed(engine, flow):
        logging.getLogger(__name__).warning("run %s of %s had crashed: marked crashed", crashed, flow)
    run_id = uuid.uuid4()
    host, pid, started = this_process()
    with engine.begin() as conn:
        conn.execute(
            INSERT_RUN,
            {
                "run_id": run_id,
                "flow": flow,
                "namespace": namespace,
                "prefect_flow_run_id": prefect_flow_run_id,
                "parameters": json.dumps(parameters or {}, default=str),
                "host": host,
                "pid": pid,
                "process_started_at": started,
            },
        )
    return run_id


def finish_run(
    engine: Engine,
    run_id: uuid.UUID,
    status: str,
    counts: dict[str, Any] | None = None,
    error: str | None = None,
    by_namespace: dict[str, dict[str, float]] | None = None,
) -> None:
    """Close a run with one of the final states (module docstring) and its counts; a run over every
    namespace is attributed to each namespace it worked in (by_namespace: what its results counted there)."""
    with engine.begin() as conn:
        conn.execute(
            FINISH_RUN,
            {
                "run_id": run_id,
                "status": status,
                "counts": json.dumps(counts or {}, default=str),
                "error": error[:ERROR_CHARS] if error else None,
            },
        )
        conn.execute(ATTRIBUTE_RUN, {"run_id": run_id, "given": json.dumps(by_namespace or {})})


def recorded_error(exc: BaseException) -> str:
    """What pipeline_runs keeps of the exception that ended a run (module docstring): the class, the message
    of the project's own errors, a database error's SQLSTATE; never another message, which may quote user
    text."""
    name = type(exc).__name__
    if isinstance(exc, (UserError, LLMError)):
        return f"{name}: {exc}"
    state = getattr(getattr(exc, "orig", None), "sqlstate", None)
    if isinstance(state, str):
        return f"{name} (SQLSTATE {state}; the message is not recorded, it may quote a row)"
    return f"{name} (the message is not recorded, it may quote user text; see the process's own output)"


# A Prefect failure message, "Flow run encountered an exception: Class: text": the class and the text.
PREFECT_FAILURE = re.compile(
    r"^(?P<head>.*?exception: )(?P<name>[A-Za-z_][\w.]*)(?::\s*(?P<text>.*))?$", re.S
)
OWN_ERRORS = frozenset(
    {"LLMError", "BudgetExhausted", "NamespaceBudgetExhausted", "UserError", "StageFailed"}
)


def previous_state(engine: Engine, run_id: uuid.UUID) -> str | None:
    """The final state of the run of the same flow (and namespace) before this one, if any."""
    with engine.connect() as conn:
        state = conn.execute(SELECT_PREVIOUS_STATE, {"run_id": run_id}).scalar()
    return str(state) if state is not None else None


def fail_flow_run(
    engine: Engine, prefect_flow_run_id: str | uuid.UUID, error: str, status: str = FAILED
) -> None:
    """Close the still-running row of a Prefect flow run as failed or crashed (the flows' failure and crash
    hook); of the state's message only the exception class is kept unless it is one of the project's own
    errors."""
    found = PREFECT_FAILURE.match(error)
    if found is not None and found.group("name").rsplit(".", 1)[-1] not in OWN_ERRORS:
        error = f"{found.group('head')}{found.group('name')} (message not recorded, it may quote user text)"
    params = {"flow_run_id": prefect_flow_run_id, "error": error[:ERROR_CHARS], "status": status}
    with engine.begin() as conn:
        for run_id in conn.execute(FAIL_FLOW_RUN, params).scalars().all():
            conn.execute(ATTRIBUTE_RUN, {"run_id": run_id, "given": "{}"})


def record_run(
    engine: Engine,
    flow: str,
    parameters: dict[str, Any],
    namespace: str | None,
    work: Callable[[uuid.UUID], R],
) -> R:
    """Run work(run_id) inside a pipeline_runs row: closed with the result's state and counts, or failed
    with the error when work raises (the exception goes on)."""
    run_id = start_run(engine, flow, parameters, namespace)
    try:
        result = work(run_id)
    except BaseException as exc:
        finish_run(engine, run_id, FAILED, error=recorded_error(exc))
        raise
    errors = "; ".join(stage_errors([result])) or None
    finish_run(engine, run_id, run_status([result]), run_counts(result), errors, namespace_counts([result]))
    return result
