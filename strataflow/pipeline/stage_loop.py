"""The one loop of the LLM stages (extract, hot memory, rollup, reflect) and its failure policy.

Each stage finds its units (scopes, or scope-weeks for the rollup: strataflow/pipeline/scopes.py) and hands
them here with the function that does one unit. One policy for all (models/results.py LLMStageResult):

- a unit whose model call fails (LLMError) is counted and named by hash (runs.scope_ref, never the subject
  id) and the next unit goes on; the task raises only when every attempted unit failed;
- a unit a provider batch left without an answer (AnswerPending: the gateway answers from the cache only)
  is counted as deferred and named in the result's errors; the next run sends it;
- a budget stop (BudgetExhausted, no request sent) ends the stage cleanly: the units done stay done, the
  result says budget_stopped and the next run resumes from the watermarks;
- the run's budget is shared fairly among the namespaces of the stage's units (LLMGateway.share_budget): a
  namespace that has spent its share (NamespaceBudgetExhausted) stops only its own units, each named in the
  result's errors (the run ends completed_with_errors; they are not failures, and resume next run), while
  the other namespaces' units go on;
- the requests sent, cache hits, tokens and cost of the stage's gateway are recorded on the result.

A stage's gateway carries the run id it was given (None outside a recorded run), so its ledger rows and the
lineage of what it writes name the same run.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar

from models.results import LLMStageResult
from strataflow.config import Settings
from strataflow.llm.gateway import (
    AnswerPending,
    BudgetExhausted,
    LLMError,
    LLMGateway,
    NamespaceBudgetExhausted,
)
from strataflow.pipeline.runs import scope_ref, stage_logger

U = TypeVar("U")
R = TypeVar("R", bound=LLMStageResult)


def stage_gateway(settings: Settings, run_id: uuid.UUID | None, answers_only: bool = False) -> LLMGateway:
    """The gateway of one stage run: the configured models, the run's budget and ledger (answers_only: the
    cached answers of a provider batch, no request: strataflow.llm.batch)."""
    return LLMGateway(settings, run_id, answers_only=answers_only)


def run_units(
    stage: str,
    gateway: LLMGateway,
    units: Iterable[U],
    work: Callable[[U], None],
    result: R,
    unit_name: Callable[[U], str],
) -> R:
    """Do work(unit) for each unit under the stage failure policy (module docstring); returns result with
    the gateway's spend recorded."""
    log = stage_logger(f"strataflow.pipeline.{stage}")
    units = list(units)
    gateway.share_budget(ns for ns in (getattr(unit, "namespace", None) for unit in units) if ns)
    stopped: dict[str, str] = {}  # namespace -> why its share stopped it
    try:
        for unit in units:
            namespace = getattr(unit, "namespace", None)
            if namespace in stopped:
                result.errors.append(f"{unit_name(unit)}: {stopped[namespace]}")
                continue
            try:
                work(unit)
            except NamespaceBudgetExhausted as exc:
                stopped[exc.namespace] = str(exc)
                result.errors.append(f"{unit_name(unit)}: {exc}")
                log.warning(
                    "%s: namespace %s stopped by its budget share; the others go on", stage, exc.namespace
                )
            except AnswerPending as exc:
                result.deferred += 1
                result.errors.append(f"{unit_name(unit)}: {exc}")
            except BudgetExhausted as exc:
                log.warning("%s stopped by the LLM budget (%s); the next run resumes", stage, exc)
                result.budget_stopped = True
                break
            except LLMError as exc:
                name = unit_name(unit)
                result.add_failure(name, exc)
                log.error("%s of %s failed: %s", stage, name, exc)
    finally:
        record_spend(result, gateway)
    return result


def record_spend(result: LLMStageResult, gateway: LLMGateway) -> None:
    """The requests, cache hits, tokens and cost of the gateway, on the stage's result."""
    result.llm_calls, result.cache_hits = gateway.requests_sent, gateway.cache_hits
    result.tokens, result.cost_usd = gateway.tokens_used, round(gateway.cost_usd, 6)


class ScopeUnit(Protocol):
    """A unit that names a scope (a Scope, a scope-week row)."""

    @property
    def namespace(self) -> str: ...

    @property
    def subject_id(self) -> str: ...


def scope_name(unit: ScopeUnit) -> str:
    """How a failed scope is named: scope_ref of its namespace and subject (never the subject id)."""
    return scope_ref(unit.namespace, unit.subject_id)
