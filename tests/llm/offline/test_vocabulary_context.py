"""The one key normaliser and the seed 000 vocabulary; the assistant's turn as context only (through the
extraction prompt and litellm's real call path); the second offline model name."""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from models.llm import ExtractedItem, ExtractionOutput
from models.vocabulary import PROFILE_KEYS, normalize_key, program_category, section_of
from strataflow.llm.offline import register_offline_provider
from strataflow.llm.offline.extract import extract_items
from strataflow.llm.prompt_blocks import parse_blocks
from strataflow.memory.item_fields import normalize_key as api_normalize_key
from strataflow.pipeline.extract import build_extract_messages
from strataflow.pipeline.scopes import ScopeMessage

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ("currentJobTitle", "job_title"),
        ("totalYearsOfExperience", "years_of_experience"),
        ("annualIncome", "annual_income"),
        ("hasHongKongEmployer", "has_hk_employer"),
        ("hasHKEmployer", "has_hk_employer"),
        ("hasTechBackground", "has_tech_background"),
        ("investmentAmount", "investment_amount"),
        ("investmentCapacity", "investment_amount"),
        ("familySupport", "family_support"),
        ("targetCategory", "target_programs"),
        ("immigrationTimeline", "timeline"),
        ("currentLocation", "location"),
        ("maritalStatus", "marital_status"),
        ("Job Title", "job_title"),
        ("incomeCurrency", "income_currency"),
        ("favouriteColour", "favourite_colour"),  # not in the vocabulary: plain snake_case
    ],
)
def test_one_normaliser_maps_seed_names_to_the_vocabulary(raw: str, key: str) -> None:
    assert normalize_key(raw) == key
    assert api_normalize_key(raw) == key  # the memory API uses the same normaliser


def test_the_seed_000_fields_are_in_the_vocabulary() -> None:
    for key in (
        "has_hk_employer",
        "has_tech_background",
        "investment_amount",
        "family_support",
        "income_currency",
    ):
        assert key in PROFILE_KEYS
    assert section_of("has_hk_employer") == "immigration" and section_of("family_support") == "family"


def test_a_model_writing_camel_case_keys_is_normalised_and_nonsense_refused() -> None:
    item = ExtractedItem(
        kind="fact", key="currentJobTitle", value="PM", statement="I'm a PM", source_message_ids=[1]
    )
    assert item.key == "job_title"
    with pytest.raises(ValidationError, match="memory key"):
        ExtractedItem(kind="fact", key="__", value=1, statement="x", source_message_ids=[1])


@pytest.mark.parametrize("value", ["QMAS", "GEP", "IANG", "TTPS", "CIES", "TECHTAS", "TechTAS", "ttps"])
def test_the_seed_program_categories_are_accepted_as_spelled_in_the_enum(value: str) -> None:
    assert program_category(value) == value.upper()
    assert program_category("ASMTP") is None  # an official program, but not in seed 000's category enum


def test_program_items_carry_the_seed_category() -> None:
    items = extract_items([{"id": 1, "role": "user", "text": "我打算申请高才通"}])
    programs = next(item for item in items if item["key"] == "target_programs")
    assert programs["value"] == ["TTPS"] and programs["category"] == "TTPS"
    techtas = extract_items([{"id": 1, "role": "user", "text": "We plan to apply for TechTAS"}])
    assert techtas[0]["value"] == ["TECHTAS"] and techtas[0]["category"] == "TECHTAS"


def _message(message_id: int, role: str, text: str) -> ScopeMessage:
    return ScopeMessage(
        message_id=message_id,
        role=role,
        content=text,
        content_hash=hashlib.sha256(text.encode()).hexdigest(),
        event_at=datetime(2026, 11, 2, 9, message_id, tzinfo=UTC),
        ingest_seq=message_id,
    )


def test_the_prompt_marks_assistant_turns_as_context_and_user_only_batches_are_unchanged() -> None:
    exchange = [_message(1, "user", "我在深圳做产品"), _message(2, "assistant", "So you are 35?")]
    user = build_extract_messages(exchange, ["fact:location"])[1]["content"]
    blocks = parse_blocks(user)
    lines = [json.loads(line) for line in blocks["messages"].splitlines()]
    assert lines[1]["role"] == "assistant" and lines[1]["context"] is True and "context" not in lines[0]
    assert "never take a fact" in blocks["roles"]
    only_user = build_extract_messages(exchange[:1], [])[1]["content"]
    assert "<roles>" not in only_user and '"context"' not in only_user


@pytest.fixture(scope="module")
def litellm() -> Any:
    import litellm

    register_offline_provider()
    return litellm


def _extract(litellm: Any, batch: list[ScopeMessage], model: str = "offline/rules") -> dict[str, Any]:
    response = litellm.completion(
        model=model, messages=build_extract_messages(batch, []), num_retries=0, max_retries=0, temperature=0
    )
    output = ExtractionOutput.model_validate_json(response.choices[0].message.content)
    return {item.key: (item.value, item.source_message_ids) for item in output.items}


@pytest.mark.parametrize(
    "assistant",
    [
        "So you are 35?",
        "You're 35 and live in Boston, right?",
        "您今年35岁，在杭州工作，对吧？",
        "Great, a 35-year-old PM!",
    ],
)
def test_an_assistant_turn_never_gives_a_fact(litellm: Any, assistant: str) -> None:
    got = _extract(litellm, [_message(1, "user", "Hi there"), _message(2, "assistant", assistant)])
    assert got == {}
    confirmed = _extract(litellm, [_message(1, "assistant", assistant), _message(2, "user", "yes")])
    assert confirmed == {}  # a "yes" is not a stated value


@pytest.mark.parametrize(
    ("question", "answer", "key", "value"),
    [
        ("How old are you?", "41", "age", 41),
        ("请问您今年多大？", "三十出头吧", "age", "early 30s"),
        ("Which city are you based in?", "Leeds", "location", "Leeds"),
        ("您是哪个学校毕业的？", "港大", "university", "香港大学"),
        ("What do you do for work?", "a data analyst", "job_title", "data analyst"),
        ("您的年薪大概多少？", "60w左右", "annual_income", 600000),
    ],
)
def test_a_bare_answer_reads_the_assistants_question_for_context(
    litellm: Any, question: str, answer: str, key: str, value: Any
) -> None:
    got = _extract(litellm, [_message(1, "assistant", question), _message(2, "user", answer)])
    assert got[key] == (value, [2])  # the user's message is the source, never the assistant's


def test_the_second_offline_model_name_answers_with_the_same_rules(litellm: Any) -> None:
    batch = [
        _message(1, "user", "我今年32岁，浙大计算机硕士毕业的，现在在杭州做前端开发，工作8年了，年薪大概80万")
    ]
    assert _extract(litellm, batch, "offline/rules-v2") == _extract(litellm, batch, "offline/rules")
    response = litellm.completion(
        model="offline/rules-v2", messages=build_extract_messages(batch, []), num_retries=0, max_retries=0
    )
    assert response.model == "offline/rules-v2"
    with pytest.raises(Exception, match="offline/rules or offline/rules-v2"):
        litellm.completion(model="offline/rulez", messages=build_extract_messages(batch, []), num_retries=0)
