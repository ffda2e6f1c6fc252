"""The LLM gateway: the one place strataflow calls a model.

Every request goes through `LLMGateway.complete`: the stage's model from settings, litellm's real call path
(the offline provider for `offline/...` models), structured output parsed into a pydantic schema of
models/llm.py with exactly one repair call on a schema or JSON error, retries with exponential backoff on
429, 5xx and timeouts (litellm's and the OpenAI SDK's own retries are off), a per-process concurrency limit,
one `llm_calls` row per request sent (committed on a connection of the gateway's own small pool, so it
survives the caller's rollback and never waits for the caller's pool), a result cache (`llm_cache`, keyed by
stage, prompt version, model, namespace and input hash: one namespace never gets another's answer) and a
per-run budget checked BEFORE each request. A cache hit or a budget refusal sends nothing and writes no row.
The ledger rows, the cache and the run's spend are read and written in strataflow.llm.ledger.

The run's token budget is shared fairly among the namespaces a stage works for (share_budget): each gets
STRATAFLOW_LLM_BUDGET_NAMESPACE_TOKENS[namespace] when set, else an equal part of
STRATAFLOW_LLM_BUDGET_TOKENS.
A namespace that has spent its share is refused (NamespaceBudgetExhausted) while the others go on, so one
tenant with many subjects cannot starve the rest; the run's whole budget still stops everything.

API keys come only from the environment (litellm reads them); error texts are scrubbed before they are stored.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from strataflow.config import Settings
from strataflow.db.engine import ledger_engine_for
from strataflow.llm import lazy, rate_limits
from strataflow.llm.ledger import (
    LLMCall,
    cached_answer,
    input_hash,
    namespace_spend,
    record_call,
    run_spend,
    store_answer,
)
from strataflow.llm.tokens import count_completion_tokens, count_prompt_tokens

logger = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)

STAGE_MODEL_FIELD = {
    "extract": "extract_model",
    "rollup": "rollup_model",
    "reflect": "reflect_model",
    "hot_summary": "extract_model",
}
BACKOFF_CAP_S = 30.0
ERROR_CHARS = 500
SECRET_PATTERNS = (
    re.compile(r"\b(sk|pk|rk|key)-[A-Za-z0-9_\-]{6,}"),
    re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._\-]+"),
    re.compile(r"(?i)((?:api[_-]?key|authorization|x-api-key)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"),
)


class LLMError(RuntimeError):
    """A stage could not get a usable answer from its model (after retries, or after the one repair)."""


class AnswerPending(LLMError):
    """The gateway answers from the cache only (`answers_only`: a batch run applying what its provider batch
    returned) and has no answer for this work: nothing was sent. The unit is left for the next run."""


class BudgetExhausted(LLMError):
    """The run's token or USD budget is spent; no request was sent. The stage stops and resumes next run."""


class NamespaceBudgetExhausted(BudgetExhausted):
    """One namespace's share of the run's budget is spent; no request was sent. Only that namespace's
    scopes stop (the stage goes on with the others) and resume next run."""

    def __init__(self, namespace: str, message: str) -> None:
        super().__init__(message)
        self.namespace = namespace


@dataclass
class _Reply:
    parsed: BaseModel | None
    content: str
    error: str | None


_SEMAPHORES: dict[int, threading.BoundedSemaphore] = {}
_SEMAPHORES_LOCK = threading.Lock()


def _semaphore(limit: int) -> threading.BoundedSemaphore:
    """One semaphore per process and limit, shared by every gateway (llm_concurrency requests in flight)."""
    with _SEMAPHORES_LOCK:
        if limit not in _SEMAPHORES:
            _SEMAPHORES[limit] = threading.BoundedSemaphore(limit)
        return _SEMAPHORES[limit]


def _register_offline() -> None:
    from strataflow.llm.offline import register_offline_provider

    register_offline_provider()


def scrub_secrets(message: str) -> str:
    """The error text without API keys: every secret-looking env value and key-shaped token is masked."""
    for name, value in os.environ.items():
        if (
            value
            and len(value) >= 6
            and any(word in name.upper() for word in ("KEY", "TOKEN", "SECRET", "PASSWORD"))
        ):
            message = message.replace(value, "***")
    for pattern in SECRET_PATTERNS:
        message = pattern.sub(lambda m: (m.group(1) if m.lastindex else "") + "***", message)
    return message[:ERROR_CHARS]


def provider_error(exc: BaseException, call: LLMCall, attempt: int) -> str:
    """What operations data keeps of a failed request (llm_calls, the LLMError that reaches pipeline_runs,
    Prefect states, logs and alerts): the error class, the provider's HTTP status and name, and a reference
    to its llm_calls row (input hash prefix / attempt). Never the error's text: providers quote the request
    or the response in it, and both hold user messages."""
    status = getattr(exc, "status_code", None)
    provider = getattr(exc, "llm_provider", None)
    parts = [type(exc).__name__]
    if isinstance(status, int):
        parts.append(f"HTTP {status}")
    if isinstance(provider, str) and re.fullmatch(r"[\w.-]{1,40}", provider):
        parts.append(f"provider {provider}")
    return f"{', '.join(parts)} (ref {call.input_hash[:12]}/{attempt} in llm_calls)"


def describe_validation_error(exc: ValidationError) -> str:
    """The errors of an invalid model output without the values they are about (pydantic's text quotes the
    output, which holds user text): field path, message and type only. A message from one of our own
    validators may quote its value, so its quoted parts are dropped too."""
    parts = []
    for error in exc.errors(include_input=False, include_url=False, include_context=False):
        where = ".".join(str(part) for part in error["loc"]) or "output"
        message = error["msg"]
        if error["type"] in ("value_error", "assertion_error"):
            message = re.sub(r"'[^']*'|\"[^\"]*\"", "…", message)
        parts.append(f"{where}: {message} [{error['type']}]")
    return f"{exc.error_count()} validation error(s) for {exc.title}: " + "; ".join(parts)


def parse_output(content: str, schema: type[T], context: dict[str, Any] | None = None) -> T:
    """The completion text as a schema instance (validated with `context`: what the schema checks against
    the request, e.g. the prompt's line ids); a ```json fence around it is tolerated."""
    body = content.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", body, re.DOTALL)
    if fenced:
        body = fenced.group(1)
    return schema.model_validate_json(body, context=context)


SCHEMA_INSTRUCTIONS = (
    "Reply with only one JSON object (no prose, no code fence) that validates against this JSON "
    "schema:\n{schema}"
)


def with_schema_instructions(messages: list[dict[str, Any]], schema: type[BaseModel]) -> list[dict[str, Any]]:
    """The messages with the schema's JSON instructions at the end of the system message (for models asked
    without a json_schema response_format)."""
    compact = json.dumps(schema.model_json_schema(), ensure_ascii=False, separators=(",", ":"))
    note = SCHEMA_INSTRUCTIONS.format(schema=compact)
    if messages and messages[0]["role"] == "system":
        return [{**messages[0], "content": f"{messages[0]['content']}\n\n{note}"}, *messages[1:]]
    return [{"role": "system", "content": note}, *messages]


class LLMGateway:
    """Structured LLM calls with ledger, cache, retries, repair, concurrency limit and a per-run budget."""

    def __init__(
        self,
        settings: Settings,
        run_id: uuid.UUID | None,
        backoff_s: float = 1.0,
        answers_only: bool = False,
    ) -> None:
        self.settings = settings
        self.answers_only = answers_only  # cached answers only (a batch's), never a request
        self.engine = ledger_engine_for(settings)  # its own small pool: see ledger_engine_for
        self.run_id = run_id
        self.backoff_s = backoff_s
        self.tokens_used = 0
        self.cost_usd = 0.0
        self.requests_sent = 0
        self.cache_hits = 0
        self.namespaces: tuple[str, ...] = ()
        self._tokens_by_namespace: dict[str, int] = {}
        self._lock = threading.Lock()

    def model_for(self, stage: str) -> str:
        if stage not in STAGE_MODEL_FIELD:
            raise ValueError(f"unknown LLM stage {stage!r}; expected one of {sorted(STAGE_MODEL_FIELD)}")
        return str(getattr(self.settings, STAGE_MODEL_FIELD[stage]))

    def complete(
        self,
        stage: str,
        prompt_version: str,
        messages: list[dict[str, Any]],
        schema: type[T],
        namespace: str | None = None,
        subject_id: str | None = None,
        cache_key: str | None = None,
        fresh: bool = False,
        event_at: datetime | None = None,
        context: dict[str, Any] | None = None,
    ) -> T:
        """The model's answer parsed into schema; from the cache when the same work was done before.

        cache_key: the caller's deterministic identity of the work (e.g. source message ids and content
        hashes); by default the messages themselves. fresh: ask the model even when the cache has an answer
        (a forced recompute); the new answer replaces the cached one. Raises BudgetExhausted before sending
        when the run's budget is spent, LLMError when retries or the one repair call do not give a valid
        answer. event_at: the event time of the work (its newest message, the week's start), kept on each
        ledger row so that spend can be shown on event time. context: validation context of the answer
        (what it must agree with in the request; a violation gets the repair turn like a schema error).
        """
        call = self.call_for(stage, prompt_version, messages, schema, namespace, subject_id, cache_key)
        model = call.model
        cached = None if fresh else cached_answer(self.engine, call, schema)
        if cached is not None:
            with self._lock:
                self.cache_hits += 1
            return cached
        if self.answers_only:
            raise AnswerPending(f"{stage}: the batch has no answer for this work yet; the next run sends it")
        attempt = [0]
        reply = self._request_with_retries(call, messages, schema, attempt, event_at, context)
        if reply.parsed is None:
            repair = [
                *messages,
                {"role": "assistant", "content": reply.content},
                {
                    "role": "user",
                    "content": "Your reply did not match the required JSON schema. Validation error:\n"
                    f"{reply.error}\nReply again with only the corrected JSON object, nothing else.",
                },
            ]
            reply = self._request_with_retries(call, repair, schema, attempt, event_at, context)
            if reply.parsed is None:
                raise LLMError(
                    f"{stage}: {model} returned invalid output twice (after one repair call): {reply.error}"
                )
        store_answer(self.engine, call, reply.parsed)
        return reply.parsed  # type: ignore[return-value]

    def call_for(
        self,
        stage: str,
        prompt_version: str,
        messages: list[dict[str, Any]],
        schema: type[BaseModel],
        namespace: str | None = None,
        subject_id: str | None = None,
        cache_key: str | None = None,
    ) -> LLMCall:
        """The identity of this work in the ledger and the cache (what `complete` and a batch share)."""
        model = self.model_for(stage)
        return LLMCall(
            stage, prompt_version, model, input_hash(messages, schema, cache_key), namespace, subject_id
        )

    # -- budget -------------------------------------------------------------------------------------------

    def spent(self) -> tuple[int, float]:
        """(tokens, usd) this run has spent: from the ledger when there is a run, else this gateway's."""
        if self.run_id is None:
            return self.tokens_used, self.cost_usd
        return run_spend(self.engine, self.run_id)

    def share_budget(self, namespaces: Iterable[str]) -> None:
        """Split the run's token budget among these namespaces (the ones a stage has work for)."""
        self.namespaces = tuple(sorted(set(namespaces)))

    def namespace_budget(self, namespace: str | None) -> int | None:
        """The tokens namespace may spend in this run: its configured share, else an equal part of the
        budget among the namespaces shared (None: no share, only the run's budget applies)."""
        if namespace is None:
            return None
        configured = self.settings.llm_budget_namespace_tokens.get(namespace)
        if configured is not None:
            return configured
        if len(self.namespaces) < 2 or namespace not in self.namespaces:
            return None
        return self.settings.llm_budget_tokens // len(self.namespaces)

    def _check_budget(self, call: LLMCall) -> None:
        tokens, usd = self.spent()
        if tokens >= self.settings.llm_budget_tokens:
            raise BudgetExhausted(
                f"{call.stage}: the run's token budget is spent "
                f"({tokens} of {self.settings.llm_budget_tokens}"
                " tokens, STRATAFLOW_LLM_BUDGET_TOKENS); the next run resumes"
            )
        if self.settings.llm_budget_usd is not None and usd >= self.settings.llm_budget_usd:
            raise BudgetExhausted(
                f"{call.stage}: the run's USD budget is spent (${usd:.4f} of ${self.settings.llm_budget_usd},"
                " STRATAFLOW_LLM_BUDGET_USD); the next run resumes"
            )
        share = self.namespace_budget(call.namespace)
        if share is not None and call.namespace is not None:
            spent = (
                namespace_spend(self.engine, self.run_id, call.namespace)
                if self.run_id is not None
                else self._tokens_by_namespace.get(call.namespace, 0)
            )
            if spent >= share:
                raise NamespaceBudgetExhausted(
                    call.namespace,
                    f"{call.stage}: namespace {call.namespace!r} has spent its share of the run's token "
                    f"budget ({spent} of {share} tokens; STRATAFLOW_LLM_BUDGET_NAMESPACE_TOKENS, or an equal "
                    "part of STRATAFLOW_LLM_BUDGET_TOKENS); its scopes resume next run",
                )

    # -- requests -----------------------------------------------------------------------------------------

    def _request_with_retries(
        self,
        call: LLMCall,
        messages: list[dict[str, Any]],
        schema: type[BaseModel],
        attempt: list[int],
        event_at: datetime | None = None,
        context: dict[str, Any] | None = None,
    ) -> _Reply:
        """Send until a reply arrives (valid or not); retry 429, 5xx and timeouts with exponential backoff."""
        litellm = lazy.litellm()
        retryable = (
            (litellm.RateLimitError, "rate_limited"),
            (litellm.Timeout, "timeout"),  # before APIConnectionError: Timeout is a subclass of it
            (litellm.InternalServerError, "server_error"),
            (litellm.ServiceUnavailableError, "server_error"),
            (litellm.APIConnectionError, "server_error"),
        )
        last_error = ""
        for retry in range(self.settings.llm_max_retries + 1):
            self._check_budget(call)
            rate_limits.wait_for_slot(self.settings, call.model)  # the model's requests per minute, if set
            attempt[0] += 1
            started = time.monotonic()
            try:
                with _semaphore(self.settings.llm_concurrency):
                    response = self._send(litellm, call.model, messages, schema)
            except Exception as exc:  # litellm maps provider errors onto its own classes; name them below
                latency = int((time.monotonic() - started) * 1000)
                outcome = next((name for cls, name in retryable if isinstance(exc, cls)), "error")
                last_error = provider_error(exc, call, attempt[0])
                self._record(call, attempt[0], outcome, latency, error=last_error, event_at=event_at)
                if outcome == "error":
                    raise LLMError(f"{call.stage}: {call.model} request failed: {last_error}") from None
                if retry < self.settings.llm_max_retries:
                    delay = min(BACKOFF_CAP_S, self.backoff_s * 2**retry)
                    logger.info("%s: %s, retrying in %.1fs", call.stage, outcome, delay)
                    time.sleep(delay)
                continue
            latency = int((time.monotonic() - started) * 1000)
            content = response.choices[0].message.content or ""
            try:
                parsed: BaseModel | None = parse_output(content, schema, context)
                error = None
            except ValidationError as exc:
                parsed, error = None, scrub_secrets(describe_validation_error(exc))
            prompt_tokens, completion_tokens = self._usage(call.model, messages, content, response)
            self._record(
                call,
                attempt[0],
                "ok" if parsed is not None else "invalid_output",
                latency,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
                cost=self._cost(litellm, response),
                error=error,
                event_at=event_at,
            )
            return _Reply(parsed, content, error)
        raise LLMError(
            f"{call.stage}: {call.model} kept failing after {self.settings.llm_max_retries} retries: "
            f"{last_error}"
        )

    def _send(self, litellm: Any, model: str, messages: list[dict[str, Any]], schema: type[BaseModel]) -> Any:
        if model.startswith("offline/"):
            _register_offline()
        kwargs: dict[str, Any] = {
            **self.request_body(litellm, model, messages, schema),
            "timeout": self.settings.llm_timeout_s,
            "num_retries": 0,
            "max_retries": 0,
        }
        if self.settings.llm_api_base and not model.startswith("offline/"):
            kwargs["api_base"] = self.settings.llm_api_base
        return litellm.completion(**kwargs)

    def request_body(
        self, litellm: Any, model: str, messages: list[dict[str, Any]], schema: type[BaseModel]
    ) -> dict[str, Any]:
        """The chat completion request for this work (model, messages, temperature, response_format): what
        a request sends and what a batch line carries (strataflow.llm.batch)."""
        kwargs: dict[str, Any] = {"model": model, "messages": messages, "temperature": 0}
        mode = self.response_format(litellm, model)
        if mode == "json_schema":
            json_schema = {"name": schema.__name__, "schema": schema.model_json_schema(), "strict": False}
            kwargs["response_format"] = {"type": "json_schema", "json_schema": json_schema}
        elif mode == "json_object_schema":
            # llama-cpp-python's server answers 500 to json_schema but builds the same grammar from a schema
            # given with json_object: valid by construction there too
            kwargs["response_format"] = {"type": "json_object", "schema": schema.model_json_schema()}
        elif mode != "offline":
            # No schema travels with the request: the instructions carry it, so a model that ignores
            # response_format (or a server without it) still knows the shape to return.
            kwargs["messages"] = with_schema_instructions(messages, schema)
            if mode == "json_object":
                kwargs["response_format"] = {"type": "json_object"}
        return kwargs

    def response_format(self, litellm: Any, model: str) -> str:
        """How this model is asked for JSON (STRATAFLOW_LLM_RESPONSE_FORMAT; auto asks litellm): json_schema,
        json_object_schema, json_object or none; offline for the offline provider, which always answers in
        its schema."""
        if model.startswith("offline/"):
            return "offline"
        if self.settings.llm_response_format != "auto":
            return self.settings.llm_response_format
        try:
            if litellm.supports_response_schema(model=model):
                return "json_schema"
            params = litellm.get_supported_openai_params(model=model) or []
        except Exception:  # unknown provider: send no optional parameter rather than fail
            return "none"
        return "json_object" if "response_format" in params else "none"

    @staticmethod
    def _usage(model: str, messages: list[dict[str, Any]], content: str, response: Any) -> tuple[int, int]:
        """Tokens from the response's usage; counted with the model's tokenizer when a provider omits them."""
        usage = getattr(response, "usage", None)
        prompt = int(getattr(usage, "prompt_tokens", 0) or 0)
        completion = int(getattr(usage, "completion_tokens", 0) or 0)
        if prompt == 0:
            prompt = count_prompt_tokens(model, messages)
        if completion == 0 and content:
            completion = count_completion_tokens(model, content)
        return prompt, completion

    @staticmethod
    def _cost(litellm: Any, response: Any) -> float | None:
        try:
            cost = litellm.completion_cost(completion_response=response)
        except Exception:  # litellm raises a bare Exception for models without a known price
            return None
        return float(cost) if cost else None

    # -- ledger and cache ---------------------------------------------------------------------------------

    def _record(
        self,
        call: LLMCall,
        attempt: int,
        outcome: str,
        latency_ms: int,
        prompt_tokens: int = 0,
        completion_tokens: int = 0,
        cost: float | None = None,
        error: str | None = None,
        event_at: datetime | None = None,
    ) -> None:
        """One ledger row per request sent (strataflow.llm.ledger), and this gateway's counters."""
        record_call(
            self.engine, self.run_id, call, attempt, outcome, latency_ms,
            prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost=cost, error=error,
            event_at=event_at,
        )  # fmt: skip
        with self._lock:
            self.requests_sent += 1
            self.tokens_used += prompt_tokens + completion_tokens
            self.cost_usd += cost or 0.0
            if call.namespace is not None:
                spent = self._tokens_by_namespace.get(call.namespace, 0)
                self._tokens_by_namespace[call.namespace] = spent + prompt_tokens + completion_tokens
