"""Structured output as real models give it, over litellm's HTTP path against a scripted OpenAI-compatible
server on 127.0.0.1: how a stage asks for its schema (json_schema response_format, or JSON instructions
carrying the schema), the one repair turn quoting the validation error, and an answer still invalid after
it: recorded in llm_calls with its reason, its scope failed and named in a completed_with_errors run, nothing
of it applied and its watermark left for the next run."""

from __future__ import annotations

import json
import re
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import Engine, text
from typer.testing import CliRunner

from models.llm import ExtractionOutput
from strataflow.cli import app
from strataflow.config import Settings
from strataflow.llm.gateway import LLMGateway
from strataflow.pipeline.extract_grounding import line_item_limit
from strataflow.pipeline.extract_prompt import FULL, SMALL, answer_context, extract_prompt
from strataflow.pipeline.extract_prompt_small import SMALL_SCHEMA, SMALL_SYSTEM
from strataflow.pipeline.runs import scope_ref
from strataflow.pipeline.scopes import ScopeMessage

PROMPT = [{"role": "system", "content": "Extract."}, {"role": "user", "content": "<task>\nextract\n</task>"}]
SELECT_CALLS = text(
    "select subject_id, attempt, outcome, error from llm_calls where namespace = :ns order by call_id"
)
SELECT_ITEMS = text(
    "select subject_id, key, value from memory_items where namespace = :ns and kind <> 'hot_summary'"
)
SELECT_RUN = text(
    "select status, error from pipeline_runs where flow = 'extract' and namespace = :ns"
    " order by started_at desc limit 1"
)


def _http(settings: Settings, url: str, **overrides: object) -> Settings:
    return settings.model_copy(
        update={"extract_model": "openai/test-model", "llm_api_base": url, **overrides}
    )


def test_a_json_schema_model_gets_the_stage_schema_as_response_format(
    settings: Settings, engine: Engine, llm_server: Any
) -> None:
    llm_server.script = [(200, '{"items": []}')]
    gateway = LLMGateway(_http(settings, llm_server.url, llm_response_format="json_schema"), uuid.uuid4())
    gateway.complete("extract", f"v-{uuid.uuid4()}", PROMPT, ExtractionOutput)
    sent = llm_server.requests[0]
    assert sent["response_format"]["type"] == "json_schema"
    assert sent["response_format"]["json_schema"]["name"] == "ExtractionOutput"
    assert sent["response_format"]["json_schema"]["schema"] == ExtractionOutput.model_json_schema()
    assert sent["messages"] == PROMPT, "the schema travels as response_format, the prompt is unchanged"


def test_json_object_schema_sends_the_schema_inside_a_json_object_response_format(
    settings: Settings, engine: Engine, llm_server: Any
) -> None:
    """llama-cpp-python's server refuses json_schema and makes its grammar from json_object's schema."""
    llm_server.script = [(200, '{"items": []}')]
    http = _http(settings, llm_server.url, llm_response_format="json_object_schema")
    LLMGateway(http, uuid.uuid4()).complete("extract", f"v-{uuid.uuid4()}", PROMPT, ExtractionOutput)
    sent = llm_server.requests[0]
    assert sent["response_format"] == {"type": "json_object", "schema": ExtractionOutput.model_json_schema()}


def test_a_small_model_gets_the_small_profile_and_its_flat_item_schema_as_the_grammar(
    settings: Settings, engine: Engine, llm_server: Any
) -> None:
    """The small profile over the real request path: its short instructions, the same <messages> block as
    the full profile, and the flat item list as the json_schema the server turns into a grammar; the answer
    is validated against the batch's lines as every extraction answer is."""
    small = _http(
        settings,
        llm_server.url,
        extract_model="openai/qwen2.5:1.5b-instruct",
        llm_response_format="json_schema",
    )
    prompt = extract_prompt(small)
    assert prompt is SMALL and extract_prompt(_http(settings, llm_server.url)) is FULL
    batch = [ScopeMessage(7, "user", "I live in Lisbon.", "h7", datetime(2026, 11, 2, tzinfo=UTC), 1)]
    llm_server.script = [(200, json.dumps({"items": [
        {"source_message_ids": [7], "statement": "I live in Lisbon", "kind": "fact", "key": "location",
         "value": "Lisbon"},
        {"source_message_ids": [901], "statement": "I'm Tom", "kind": "fact", "key": "name", "value": "Tom"},
    ]}))]  # fmt: skip
    output = LLMGateway(small, uuid.uuid4()).complete(
        "extract",
        prompt.version,
        prompt.messages(batch, []),
        prompt.schema_for(batch),
        context=answer_context(batch),
    )
    sent = llm_server.requests[0]
    schema = sent["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["items"].pop("maxItems") == line_item_limit("I live in Lisbon.") == 2
    assert schema["properties"]["items"] == {
        k: v for k, v in SMALL_SCHEMA["properties"]["items"].items() if k != "maxItems"
    }
    assert {**schema, "properties": None} == {**SMALL_SCHEMA, "properties": None}
    assert sent["messages"][0]["content"] == SMALL_SYSTEM
    assert sent["messages"][1] == FULL.messages(batch, [])[1], "the data blocks are the full profile's"
    assert [(i.key, i.value, i.confidence) for i in output.items] == [("location", "Lisbon", 0.9)]
    assert output.unsupported == 1, "the example's item, citing no line of the batch, is left out"


def test_a_model_without_json_schema_gets_the_schema_in_its_instructions(
    settings: Settings, engine: Engine, llm_server: Any
) -> None:
    llm_server.script = [(200, '{"items": []}')]
    gateway = LLMGateway(
        _http(settings, llm_server.url), uuid.uuid4()
    )  # auto: litellm knows no schema support
    gateway.complete("extract", f"v-{uuid.uuid4()}", PROMPT, ExtractionOutput)
    sent = llm_server.requests[0]
    assert sent["response_format"] == {"type": "json_object"}
    system = sent["messages"][0]["content"]
    assert system.startswith("Extract.") and "validates against this JSON schema" in system
    assert '"source_message_ids"' in system and len(sent["messages"]) == 2


def _ingest(tmp_path: Any, namespace: str) -> None:
    rows = [("good", "I am 41 years old and I live in Porto."), ("bad", "我在杭州工作，是一名医生。")]
    path = tmp_path / "m.jsonl"
    path.write_text(
        "".join(
            json.dumps({"conversation_id": f"c-{s}", "subject_id": s, "source_message_id": f"{s}-1",
                        "role": "user", "content": c, "created_at": "2026-11-02T09:00:00Z"},
                       ensure_ascii=False) + "\n"
            for s, c in rows
        ),
        encoding="utf-8",
    )  # fmt: skip
    done = CliRunner().invoke(app, ["ingest", "logs", str(path), "--namespace", namespace])
    assert done.exit_code == 0, done.output


def test_one_scope_repaired_and_one_still_invalid_ends_completed_with_errors_naming_it(
    engine: Engine, namespace: str, tmp_path: Any, llm_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _ingest(tmp_path, namespace)
    answers: dict[str, int] = {}

    def reply(body: dict[str, Any]) -> str:
        prompt = "\n".join(m["content"] for m in body["messages"])
        subject = "good" if "Porto" in prompt else "bad"
        answers[subject] = answers.get(subject, 0) + 1
        if answers[subject] == 1:
            return '{"items": [{"kind": "fact", "key": "age", "value": 41'  # cut short: invalid JSON
        if subject == "bad":
            return '{"items": [{"kind": "fact", "key": "city", "value": "杭州"}]}'  # no statement, no ids
        first = int(re.findall(r'\{"id":(\d+),"role":"user"', prompt)[0])
        return json.dumps({"items": [{"kind": "fact", "key": "age", "value": 41, "statement": "I am 41",
                                      "source_message_ids": [first]}]})  # fmt: skip

    llm_server.fallback = reply
    monkeypatch.setenv("STRATAFLOW_EXTRACT_MODEL", "openai/test-model")
    monkeypatch.setenv("STRATAFLOW_LLM_API_BASE", llm_server.url)
    monkeypatch.setenv("STRATAFLOW_LLM_MAX_RETRIES", "0")

    ran = CliRunner().invoke(app, ["extract", "--namespace", namespace])

    assert ran.exit_code == 0, ran.output
    with engine.connect() as conn:
        calls = [tuple(r) for r in conn.execute(SELECT_CALLS, {"ns": namespace})]
        items = [tuple(r) for r in conn.execute(SELECT_ITEMS, {"ns": namespace})]
        run = conn.execute(SELECT_RUN, {"ns": namespace}).one()
    by_subject = {s: [(a, o) for (subject, a, o, _) in calls if subject == s] for s in ("good", "bad")}
    assert by_subject == {"good": [(1, "invalid_output"), (2, "ok")],
                          "bad": [(1, "invalid_output"), (2, "invalid_output")]}  # fmt: skip
    reasons = [e for (s, _, o, e) in calls if o == "invalid_output"]
    assert all(reason and "validation error" in reason for reason in reasons), reasons
    assert items == [("good", "age", 41)], "the repaired answer applied; nothing of the invalid one"
    assert "did not match" in llm_server.prompt_of(len(llm_server.requests) - 1)
    assert run.status == "completed_with_errors"
    assert scope_ref(namespace, "bad") in run.error and "invalid output twice" in run.error

    # the failed scope's watermark stayed: the next run asks again for it alone (and fails: every unit)
    again = CliRunner().invoke(app, ["extract", "--namespace", namespace])
    assert again.exit_code == 1 and "every unit (1) failed" in again.output, again.output
    assert answers == {"good": 2, "bad": 4}


def test_an_answer_keeps_only_the_items_that_rest_on_the_prompts_lines() -> None:
    lines = {5: "I moved to Lisbon in March and I work as a data engineer.", 6: "我今年35岁，在上海工作。"}

    def item(key: str, value: object, statement: str, cites: int) -> dict[str, object]:
        return {
            "kind": "fact",
            "key": key,
            "value": value,
            "statement": statement,
            "source_message_ids": [cites],
        }

    answer = {"items": [
        item("location", "Lisbon", "moved to Lisbon", 5),
        item("age", 32, "我今年32岁", 5),  # the instructions' example, copied: not what line 5 says
        item("age", 35, "我今年35岁", 6),
        item("age", 32, "I am 32", 12),  # no such line
    ]}  # fmt: skip
    parsed = ExtractionOutput.model_validate_json(json.dumps(answer), context={"lines": lines})
    assert [(i.key, i.value) for i in parsed.items] == [("location", "Lisbon"), ("age", 35)]
    assert parsed.unsupported == 2
    cached = ExtractionOutput.model_validate(answer)  # no context (a cached answer): nothing checked
    assert len(cached.items) == 4 and cached.unsupported == 0
