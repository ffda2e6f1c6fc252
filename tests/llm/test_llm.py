"""The LLM gateway over litellm's real HTTP path, against an OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import os
import uuid

import pytest
from sqlalchemy import Engine, text

from models.llm import ExtractionOutput, HotSummaryOutput
from strataflow.config import Settings
from strataflow.llm.gateway import BudgetExhausted, LLMError, LLMGateway, scrub_secrets

VALID = (
    '{"items": [{"kind": "fact", "key": "age", "value": 32, "statement": "I am 32",'
    ' "source_message_ids": [1]}]}'
)
PROMPT = [{"role": "user", "content": "<task>\nextract\n</task>"}]


def ledger(engine: Engine, run_id: uuid.UUID) -> list[tuple]:
    with engine.connect() as conn:
        return [
            tuple(r)
            for r in conn.execute(
                text(
                    "select attempt, outcome, prompt_tokens, completion_tokens, stage, model, error"
                    " from llm_calls"
                    " where run_id = :r order by call_id"
                ),
                {"r": run_id},
            )
        ]


def http_settings(settings: Settings, url: str, **overrides: object) -> Settings:
    return settings.model_copy(
        update={"extract_model": "openai/test-model", "llm_api_base": url, **overrides}
    )


def test_rate_limit_then_bad_json_then_valid_json_succeeds_with_three_ledger_rows(
    settings, engine, llm_server
):
    llm_server.script = [(429, "slow down"), (200, '{"items": [{"kind": "fact", "key": "age"'), (200, VALID)]
    run_id = uuid.uuid4()
    gateway = LLMGateway(http_settings(settings, llm_server.url), run_id, backoff_s=0.05)
    output = gateway.complete(
        "extract", f"v-{run_id}", PROMPT, ExtractionOutput, namespace="n", subject_id="s"
    )
    assert output.items[0].value == 32
    rows = ledger(engine, run_id)
    assert [(r[0], r[1]) for r in rows] == [(1, "rate_limited"), (2, "invalid_output"), (3, "ok")]
    assert rows[2][2:6] == (100, 20, "extract", "openai/test-model")
    # the repair call showed the model its broken reply and the validation error
    assert "did not match" in llm_server.prompt_of(2) and '"key": "age"' in llm_server.prompt_of(2)
    assert all(os.environ["OPENAI_API_KEY"] not in (r[6] or "") for r in rows)
    assert gateway.tokens_used == 240 and gateway.requests_sent == 3


def test_same_work_is_answered_by_the_cache_without_a_request_or_ledger_row(settings, engine, llm_server):
    llm_server.script = [(200, VALID)]
    run_id = uuid.uuid4()
    gateway = LLMGateway(http_settings(settings, llm_server.url), run_id)
    first = gateway.complete("extract", f"v-{run_id}", PROMPT, ExtractionOutput)
    second = LLMGateway(http_settings(settings, llm_server.url), run_id).complete(
        "extract", f"v-{run_id}", PROMPT, ExtractionOutput
    )
    assert first == second
    assert len(llm_server.requests) == 1 and len(ledger(engine, run_id)) == 1


def test_spent_budget_raises_before_anything_is_sent(settings, engine, llm_server):
    run_id = uuid.uuid4()
    gateway = LLMGateway(http_settings(settings, llm_server.url, llm_budget_tokens=100), run_id)
    gateway.complete("extract", "budget", [{"role": "user", "content": f"one {run_id}"}], ExtractionOutput)
    with pytest.raises(BudgetExhausted, match="token budget"):
        gateway.complete(
            "extract", "budget", [{"role": "user", "content": f"two {run_id}"}], ExtractionOutput
        )
    assert len(llm_server.requests) == 1 and len(ledger(engine, run_id)) == 1


def test_server_errors_exhaust_retries_with_one_ledger_row_each(settings, engine, llm_server):
    llm_server.script = [(500, "boom")] * 3
    run_id = uuid.uuid4()
    gateway = LLMGateway(http_settings(settings, llm_server.url, llm_max_retries=2), run_id, backoff_s=0.01)
    with pytest.raises(LLMError, match="after 2 retries"):
        gateway.complete("extract", f"v-{run_id}", PROMPT, ExtractionOutput)
    assert [r[1] for r in ledger(engine, run_id)] == ["server_error"] * 3


def test_output_still_invalid_after_the_repair_call_raises(settings, engine, llm_server):
    llm_server.script = [(200, "not json"), (200, '{"summary": ""}')]
    run_id = uuid.uuid4()
    gateway = LLMGateway(http_settings(settings, llm_server.url), run_id)
    with pytest.raises(LLMError, match="invalid output twice"):
        gateway.complete("hot_summary", f"v-{run_id}", PROMPT, HotSummaryOutput)
    assert [r[1] for r in ledger(engine, run_id)] == ["invalid_output", "invalid_output"]


@pytest.mark.parametrize(
    ("raw", "hidden"),
    [
        ("Incorrect API key provided: sk-abcdef1234567890", "sk-abcdef1234567890"),  # OpenAI's own error text
        ("headers: Authorization: Bearer abc.def.ghi", "abc.def.ghi"),  # a bearer token echoed back
        ('{"api_key": "secret-value-99"}', "secret-value-99"),  # a key inside a JSON body
    ],
)
def test_error_texts_never_keep_an_api_key(raw, hidden):
    assert hidden not in scrub_secrets(raw)
