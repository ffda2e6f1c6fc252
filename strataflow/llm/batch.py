"""A stage's requests through the provider's batch API (OpenAI-compatible files + batches, via litellm).

Providers price batch requests at about half their list price, for answers within 24 hours: the nightly's
extraction is exactly that workload. The batch is a way to fill the gateway's cache, nothing more: the
requests are the ones the gateway would send (`LLMGateway.request_body`, one line per piece of work, with its
`LLMCall` identity), and once the provider has answered, each valid answer goes into `llm_cache` under that
identity with one `llm_calls` row at the batch price. The stage then runs as always with a gateway that
answers from the cache only (`answers_only`): the same locks, watermarks and `apply_extracted`, and a unit
whose answer is missing (failed, expired, invalid) raises AnswerPending, is counted, and is sent by the next
run. A submitted batch is recorded in `llm_batches` before anything waits on it, so a run that dies while
waiting loses nothing: the next run collects it (`open_batches`).

Three steps, each a function the CLI and the flow both call: `submit`, `refresh` (poll until the provider
reports an end), `collect`.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ValidationError
from sqlalchemy import Engine, TextClause, text

from strataflow.config import Settings
from strataflow.llm import lazy
from strataflow.llm.gateway import describe_validation_error, parse_output, scrub_secrets
from strataflow.llm.ledger import LLMCall, record_call, store_answer

logger = logging.getLogger(__name__)

ENDPOINT = "/v1/chat/completions"
ENDED = ("completed", "failed", "expired", "cancelled")  # the provider's terminal states
PROVIDER_PREFIX = "openai/"  # litellm's provider prefix; the provider itself knows the model without it

INSERT_BATCH = text(
    """
    insert into llm_batches (provider, batch_id, run_id, stage, model, status, provider_status,
                             input_file_id, request_count, requests)
    values (:provider, :batch_id, :run_id, :stage, :model, 'submitted', :provider_status, :input_file_id,
            :request_count, cast(:requests as jsonb))
    """
)
UPDATE_STATUS = text(
    """
    update llm_batches
    set provider_status = :provider_status, output_file_id = :output_file_id, error_file_id = :error_file_id,
        status = case when :ended then :provider_status else status end,
        finished_at = case when :ended then coalesce(finished_at, now()) else finished_at end
    where provider = :provider and batch_id = :batch_id and status <> 'collected'
    """
)
# collect holds its batch's row until it is done: a forget (strataflow.pipeline.forget) scrubbing the batch
# waits for it, and a collect after a forget reads the scrubbed requests.
LOCK_BATCH = text("select * from llm_batches where provider = :provider and batch_id = :batch_id for update")
SELECT_OPEN = text(
    """
    select batch_id from llm_batches
    where provider = :provider and stage = :stage and model = :model and status <> 'collected'
    order by submitted_at
    """
)
SELECT_ENDED = text(
    """
    select batch_id from llm_batches
    where provider = :provider and stage = :stage and model = :model
        and status = any(cast(:ended as text[]))
    order by submitted_at
    """
)
SELECT_PENDING_HASHES = text(
    """
    select r.value->>'input_hash' from llm_batches as b, jsonb_each(b.requests) as r
    where b.provider = :provider and b.stage = :stage and b.model = :model and b.status = 'submitted'
    """
)
MARK_COLLECTED = text(
    """
    update llm_batches
    set status = 'collected', collected_at = now(), answered = :answered, invalid = :invalid,
        missing = :missing
    where provider = :provider and batch_id = :batch_id
    """
)


@dataclass(frozen=True)
class BatchRequest:
    """One piece of work for a batch: its identity, the request the gateway would send, its event time."""

    call: LLMCall
    body: dict[str, Any]
    event_at: datetime | None = None
    context: dict[str, Any] | None = None  # the answer's validation context (gateway.parse_output)


@dataclass(frozen=True)
class BatchState:
    """What the provider last said of a batch."""

    batch_id: str
    provider_status: str
    ended: bool
    completed: int = 0
    failed: int = 0
    total: int = 0


@dataclass
class BatchCollected:
    """What collecting a batch did: answers cached, answers that did not validate, requests the provider
    failed (each a ledger row), and requests with no answer at all (failed ones included)."""

    batch_id: str
    answered: int = 0
    invalid: int = 0
    failed: int = 0
    missing: int = 0
    cost_usd: float = 0.0
    tokens: int = 0


def provider_options(settings: Settings) -> dict[str, Any]:
    """litellm's files and batches calls go to the OpenAI-compatible API at STRATAFLOW_LLM_API_BASE (else
    OpenAI's own); the key comes from OPENAI_API_KEY as for every request."""
    options: dict[str, Any] = {"custom_llm_provider": "openai"}
    if settings.llm_api_base:
        options["api_base"] = settings.llm_api_base
    return options


def provider_name(settings: Settings) -> str:
    """Which API a batch went to (batch ids are unique per provider only): the api_base, or openai."""
    return settings.llm_api_base or "openai"


def supports_batches(model: str) -> bool:
    """Whether the model is reached through an OpenAI-compatible API, whose batch API litellm drives."""
    return model.startswith(PROVIDER_PREFIX) or "/" not in model


def _field(obj: Any, name: str, default: Any = None) -> Any:
    return obj.get(name, default) if isinstance(obj, dict) else getattr(obj, name, default)


def submit(
    settings: Settings,
    engine: Engine,
    run_id: uuid.UUID | None,
    stage: str,
    model: str,
    requests: Sequence[BatchRequest],
) -> str:
    """Upload the requests as one JSONL file, create the batch, record it in llm_batches; its id."""
    if not requests:
        raise ValueError("a batch needs at least one request")
    litellm = lazy.litellm()
    provider_model = model.removeprefix(PROVIDER_PREFIX)
    lines, identities = [], {}
    for index, request in enumerate(requests):
        custom_id = f"r{index}"
        body = {**request.body, "model": provider_model}
        lines.append(json.dumps({"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body},
                                ensure_ascii=False))  # fmt: skip
        identities[custom_id] = {
            **request.call.__dict__,
            "event_at": request.event_at.isoformat() if request.event_at else None,
            "context": request.context,
        }
    data = ("\n".join(lines) + "\n").encode("utf-8")
    options = provider_options(settings)
    uploaded = litellm.create_file(file=("strataflow-batch.jsonl", data), purpose="batch", **options)
    batch = litellm.create_batch(
        completion_window="24h",
        endpoint=ENDPOINT,
        input_file_id=uploaded.id,
        metadata={"strataflow_run": str(run_id or ""), "strataflow_stage": stage},
        **options,
    )
    with engine.begin() as conn:
        conn.execute(
            INSERT_BATCH,
            {
                "provider": provider_name(settings), "batch_id": batch.id, "run_id": run_id, "stage": stage,
                "model": model,
                "provider_status": _field(batch, "status"), "input_file_id": uploaded.id,
                "request_count": len(requests), "requests": json.dumps(identities, ensure_ascii=False),
            },
        )  # fmt: skip
    logger.info("%s: submitted batch %s with %d requests", stage, batch.id, len(requests))
    return str(batch.id)


def refresh(settings: Settings, engine: Engine, batch_id: str) -> BatchState:
    """Ask the provider how the batch is doing and record it; `ended` once it completed, failed, expired
    or was cancelled."""
    batch = lazy.litellm().retrieve_batch(batch_id=batch_id, **provider_options(settings))
    status = str(_field(batch, "status") or "unknown")
    counts = _field(batch, "request_counts")
    ended = status in ENDED
    with engine.begin() as conn:
        conn.execute(
            UPDATE_STATUS,
            {
                "provider": provider_name(settings), "batch_id": batch_id, "provider_status": status,
                "ended": ended,
                "output_file_id": _field(batch, "output_file_id"),
                "error_file_id": _field(batch, "error_file_id"),
            },
        )  # fmt: skip
    return BatchState(
        batch_id,
        status,
        ended,
        completed=int(_field(counts, "completed", 0) or 0),
        failed=int(_field(counts, "failed", 0) or 0),
        total=int(_field(counts, "total", 0) or 0),
    )


def open_batches(settings: Settings, engine: Engine, stage: str, model: str) -> list[str]:
    """Batches of this stage and model at the configured provider not collected yet (oldest first): a run
    collects them, so an answer paid for is never asked again."""
    return _batch_ids(settings, engine, SELECT_OPEN, stage, model)


def ended_batches(settings: Settings, engine: Engine, stage: str, model: str) -> list[str]:
    """Batches whose end `refresh` has recorded (a status in ENDED) and that are not collected yet (oldest
    first)."""
    return _batch_ids(settings, engine, SELECT_ENDED, stage, model)


def _batch_ids(settings: Settings, engine: Engine, query: TextClause, stage: str, model: str) -> list[str]:
    params = {"provider": provider_name(settings), "stage": stage, "model": model, "ended": list(ENDED)}
    with engine.connect() as conn:
        return [row[0] for row in conn.execute(query, params)]


def pending_hashes(settings: Settings, engine: Engine, stage: str, model: str) -> set[str]:
    """Input hashes of the work in batches still waiting on the provider (not to be submitted again)."""
    params = {"provider": provider_name(settings), "stage": stage, "model": model}
    with engine.connect() as conn:
        return {row[0] for row in conn.execute(SELECT_PENDING_HASHES, params)}


def collect(
    settings: Settings, engine: Engine, ledger: Engine, batch_id: str, schema: type[BaseModel]
) -> BatchCollected:
    """Read an ended batch's answers into llm_cache and llm_calls (one row per answer, at the batch price);
    requests without a usable answer are counted and left to the next run. The batch's row stays locked
    until it is marked collected: a forget of one of its subjects waits, or went first and removed the
    subject's requests, whose answers are then skipped (never written back)."""
    with engine.begin() as conn:
        row = conn.execute(LOCK_BATCH, {"provider": provider_name(settings), "batch_id": batch_id}).one()
        if row.status == "submitted":
            raise ValueError(f"batch {batch_id} has not ended ({row.provider_status}); refresh it first")
        collected = _collect(settings, ledger, row, schema)
        conn.execute(
            MARK_COLLECTED,
            {"provider": row.provider, "batch_id": batch_id, "answered": collected.answered,
             "invalid": collected.invalid, "missing": collected.missing},
        )  # fmt: skip
    return collected


def _collect(settings: Settings, ledger: Engine, row: Any, schema: type[BaseModel]) -> BatchCollected:
    """The answers of one locked batch row into the ledger (collect)."""
    batch_id = row.batch_id
    collected = BatchCollected(batch_id)
    identities: dict[str, dict[str, Any]] = row.requests
    seen: set[str] = set()
    for line in _lines(settings, row.output_file_id):
        custom_id = str(line.get("custom_id"))
        identity = identities.get(custom_id)
        if identity is None:
            continue
        seen.add(custom_id)
        _record_answer(ledger, row, identity, line, schema, collected)
    for line in _lines(settings, row.error_file_id):
        custom_id = str(line.get("custom_id"))
        identity = identities.get(custom_id)
        if identity is None or custom_id in seen:
            continue
        seen.add(custom_id)
        code = _field(_field(line, "error") or _field(_field(line, "response"), "body") or {}, "code")
        call, event_at = _call(identity)
        error = f"batch {batch_id}: {scrub_secrets(str(code or 'failed'))[:80]}"
        record_call(ledger, row.run_id, call, 1, "error", 0, error=error, event_at=event_at)
        collected.failed += 1
    collected.missing = len(identities) - collected.answered - collected.invalid
    return collected


def _call(identity: dict[str, Any]) -> tuple[LLMCall, datetime | None]:
    """The work's identity and event time, as submit recorded them."""
    call = LLMCall(
        stage=str(identity["stage"]),
        prompt_version=str(identity["prompt_version"]),
        model=str(identity["model"]),
        input_hash=str(identity["input_hash"]),
        namespace=identity.get("namespace"),
        subject_id=identity.get("subject_id"),
    )
    event_at = identity.get("event_at")
    return call, datetime.fromisoformat(event_at) if event_at else None


def _context(identity: dict[str, Any]) -> dict[str, Any] | None:
    """The answer's validation context as submit had it (JSON turned its {id: text} keys into strings)."""
    context = identity.get("context")
    if not isinstance(context, dict):
        return None
    return {
        name: {int(key): text for key, text in part.items()}
        if name in ("lines", "said") and isinstance(part, dict)
        else part
        for name, part in context.items()
    }


def _lines(settings: Settings, file_id: str | None) -> list[dict[str, Any]]:
    """The JSON lines of one of the batch's files (none when the provider wrote no such file)."""
    if not file_id:
        return []
    content = lazy.litellm().file_content(file_id=file_id, **provider_options(settings))
    raw = content.content if hasattr(content, "content") else content
    body = raw.decode("utf-8") if isinstance(raw, bytes) else str(raw)
    lines = []
    for number, line in enumerate(body.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            lines.append(json.loads(line))
        except json.JSONDecodeError:
            logger.warning("batch file %s: line %d is not JSON; skipped (its work goes to the next run)",
                           file_id, number)  # fmt: skip
    return lines


def _record_answer(
    ledger: Engine,
    batch: Any,
    identity: dict[str, Any],
    line: dict[str, Any],
    schema: type[BaseModel],
    collected: BatchCollected,
) -> None:
    """One answer line: cached when it validates, and recorded either way at the batch price."""
    call, event_at = _call(identity)
    response = _field(line, "response") or {}
    body = _field(response, "body") or {}
    status = int(_field(response, "status_code", 0) or 0)
    if status != 200 or not _field(body, "choices"):
        error = f"batch {batch.batch_id}: HTTP {status}"
        record_call(ledger, batch.run_id, call, 1, "error", 0, error=error, event_at=event_at)
        collected.failed += 1
        return
    content = str(_field(_field(body["choices"][0], "message") or {}, "content") or "")
    usage = _field(body, "usage") or {}
    prompt_tokens = int(_field(usage, "prompt_tokens", 0) or 0)
    completion_tokens = int(_field(usage, "completion_tokens", 0) or 0)
    cost = batch_cost(call.model, prompt_tokens, completion_tokens)
    collected.tokens += prompt_tokens + completion_tokens
    collected.cost_usd += cost or 0.0
    try:
        parsed = parse_output(content, schema, _context(identity))
    except ValidationError as exc:
        collected.invalid += 1
        error = scrub_secrets(describe_validation_error(exc))
        record_call(
            ledger, batch.run_id, call, 1, "invalid_output", 0, prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens, cost=cost, error=error, event_at=event_at,
        )  # fmt: skip
        return
    store_answer(ledger, call, parsed)
    record_call(
        ledger, batch.run_id, call, 1, "ok", 0, prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens, cost=cost, event_at=event_at,
    )  # fmt: skip
    collected.answered += 1


def batch_cost(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """USD of one batch answer at the provider's batch price (litellm's cost map: *_cost_per_token_batches,
    else half the list price); None for a model without a known price."""
    litellm = lazy.litellm()
    from litellm.cost_calculator import batch_cost_calculator

    usage = litellm.Usage(
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        total_tokens=prompt_tokens + completion_tokens,
    )
    try:
        prompt_cost, completion_cost = batch_cost_calculator(usage=usage, model=model)
    except Exception:  # litellm raises a bare Exception for models it does not know
        return None
    total = float(prompt_cost) + float(completion_cost)
    return total or None
