"""The offline provider on the prompts the stages build (extraction, save_info's exchange, hot memory),
through litellm's real call path.

What the rules extract from a phrasing is the provider's behaviour, so it is tested here. The memory,
retrieval, service and task tests that load these phrasings check what their code does with an extraction
(most of them with the scripted model of tests/fixtures/scripted_model.py), not these values; each test
below names the tests whose phrasings it covers.
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from models.llm import ExtractedItem, ExtractionOutput, HotSummaryOutput
from strataflow.llm.offline import register_offline_provider
from strataflow.pipeline.extract_prompt import build_extract_messages
from strataflow.pipeline.hot_memory_prompt import hot_prompt
from strataflow.pipeline.scopes import ScopeMessage

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def litellm() -> Any:
    import litellm

    register_offline_provider()
    return litellm


def _send(litellm: Any, messages: list[dict[str, str]]) -> str:
    response = litellm.completion(
        model="offline/rules", messages=messages, num_retries=0, max_retries=0, temperature=0
    )
    return str(response.choices[0].message.content)


def _turns(*texts: str, assistant: str | None = None) -> list[ScopeMessage]:
    """ScopeMessages as the stages read them: the user's turns (ids 1, 2, ...), then the assistant's."""
    turns = [("user", text) for text in texts] + ([("assistant", assistant)] if assistant else [])
    return [
        ScopeMessage(
            index, role, body, hashlib.sha256(body.encode()).hexdigest(), T0 + timedelta(minutes=index), 0
        )
        for index, (role, body) in enumerate(turns, start=1)
    ]


def extract(litellm: Any, *texts: str, assistant: str | None = None) -> list[ExtractedItem]:
    """The extraction prompt of the turns (save_info's, when an assistant turn rides along), answered."""
    messages = build_extract_messages(_turns(*texts, assistant=assistant), [])
    return ExtractionOutput.model_validate_json(_send(litellm, messages)).items


def values(items: list[ExtractedItem]) -> dict[str, Any]:
    return {item.key: item.value for item in items}


def test_the_save_info_exchange_keeps_vague_values_vague_and_cites_only_the_user(litellm: Any) -> None:
    """The exchange of tests/memory/test_save_info.py, test_protocols_round_trip.py and service/test_http.py
    before they used the scripted model."""
    items = extract(
        litellm, "我今年三十多岁，在上海做产品经理，年薪大概60万。", assistant="好的，了解了，谢谢您的介绍。"
    )
    assert values(items) == {
        "age": "30+",
        "job_title": "产品经理",
        "location": "上海",
        "annual_income": 600000,
    }
    assert "35" not in json.dumps(values(items)), "a range is never replaced by its midpoint"
    assert {item.key for item in items if item.approximate} == {"annual_income"}  # 大概
    assert {item.kind.value for item in items} == {"fact"}
    assert {item.importance for item in items} <= {70, None}  # seed 000's FACT importance
    assert all(item.source_message_ids == [1] for item in items), "never the assistant's turn (id 2)"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("我在上海做产品经理，今年三十多岁。", {"age": "30+", "job_title": "产品经理", "location": "上海"}),
        ("我今年三十多岁，在上海做产品经理。", {"age": "30+", "job_title": "产品经理", "location": "上海"}),
        ("我今年二十几岁，在深圳工作。", {"age": "20-29", "location": "深圳"}),  # the save-info command's
        (
            "我30多岁，在深圳做产品经理",
            {"age": "30+", "job_title": "产品经理", "location": "深圳"},
        ),  # seed 000's
    ],
)
def test_seed_000_phrasings_of_the_save_info_tests(litellm: Any, text: str, expected: dict[str, Any]) -> None:
    """tests/memory/test_save_info.py (existing_info, the CLI), service/test_http.py (POST /v1/save_info) and
    test_seed_example.py (client b)."""
    assert values(extract(litellm, text)) == expected


def test_the_seed_000_example_through_the_extraction_prompt(litellm: Any) -> None:
    """tests/memory/test_seed_example.py's client a, sent as the extraction stage sends it."""
    items = extract(
        litellm, "我今年32岁，浙大计算机硕士毕业的，现在在杭州做前端开发，工作8年了，年薪大概80万"
    )
    assert values(items) == {
        "age": 32, "education": "硕士", "university": "浙江大学", "major": "计算机", "job_title": "前端开发",
        "years_of_experience": 8, "annual_income": 800000, "location": "杭州",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("texts", "expected"),
    [
        (  # summarize and get_user_context (tests/memory/test_save_info.py)
            ["我今年32岁，浙大计算机硕士毕业的。", "我已婚，有一个孩子。"],
            {"age": 32, "education": "硕士", "university": "浙江大学", "major": "计算机",
             "marital_status": "已婚", "children": 1},
        ),
        (["I'm 41 and I work as a nurse in Leeds."], {"age": 41, "job_title": "nurse"}),
        (["我想申请高才通，希望明年办好。"], {"target_programs": ["TTPS"], "timeline": "明年"}),
        (  # the profile documents (tests/memory/test_profile_documents.py)
            ["我已婚，有两个孩子。", "目前常住杭州。", "我是产品经理。"],
            {"marital_status": "已婚", "children": 2, "location": "杭州", "job_title": "产品经理"},
        ),
        (["我是数据分析师。"], {"job_title": "数据分析师"}),
        (  # the loaded subject of tests/retrieval/test_context_seeds.py
            ["我是后端开发工程师，在杭州工作。", "我博士是同济毕业的，学的金融。",
             "我想申请IANG，希望尽快办下来。"],
            {"job_title": "后端开发工程师", "location": "杭州", "education": "博士", "university": "同济大学",
             "major": "金融", "target_programs": ["IANG"], "timeline": "尽快"},
        ),
        (  # u_zh of tests/fixtures/access_data.py (tests/retrieval/test_context.py)
            ["我今年二十八岁，目前在杭州的阿里巴巴做软件工程师。", "我是浙大计算机专业毕业的，本科学历。"],
            {"age": 28, "job_title": "软件工程师", "company": "阿里巴巴", "location": "杭州",
             "education": "本科", "university": "浙江大学", "major": "计算机"},
        ),
        (  # the facts before the hostile messages (tests/llm/test_hostile_input.py)
            ["I'm 34 and I live in Austin.", "I work at Google as a senior data engineer."],
            {"age": 34, "location": "Austin", "job_title": "senior data engineer", "company": "Google"},
        ),
    ],
)  # fmt: skip
def test_profile_phrasings_of_the_memory_and_retrieval_tests(
    litellm: Any, texts: list[str], expected: dict[str, Any]
) -> None:
    items = extract(litellm, *texts)
    assert values(items) == expected
    kinds = {item.key: item.kind.value for item in items}
    assert {kinds[key] for key in ("target_programs", "timeline") if key in kinds} <= {"intent"}


def test_a_communication_preference_is_a_preference(litellm: Any) -> None:
    """get_user_context's PREFERENCE memory (tests/memory/test_save_info.py)."""
    (item,) = extract(litellm, "我比较喜欢用微信沟通。")
    assert item.kind.value == "preference" and "微信" in json.dumps(item.value, ensure_ascii=False)


def test_team_phrasings_give_people_with_roles_status_and_a_decision(litellm: Any) -> None:
    """The team of tests/memory/test_profile_documents.py: the values the work document is built from."""
    items = extract(
        litellm,
        "Riley is our tech lead.",
        "Harper is our data engineer.",
        "The search service is in progress, about 60% done.",
        "We decided to use PostgreSQL because it already runs our analytics.",
    )
    got = {(item.kind.value, item.key): item.value for item in items}
    assert got[("fact", "person_riley")] == {"name": "Riley", "role": "tech lead"}
    assert got[("fact", "person_harper")] == {"name": "Harper", "role": "data engineer"}
    assert got[("status", "status_search_service")]["status"] == "in_progress"
    assert got[("decision", "decision_postgresql")] == {
        "decision": "PostgreSQL",
        "reason": "it already runs our analytics",
    }


def _hot(litellm: Any, *texts: str) -> HotSummaryOutput:
    rows = []
    for index, content in enumerate(texts):
        at = T0 + timedelta(minutes=2 * index)
        rows.append(SimpleNamespace(message_id=10 + 2 * index, role="user", event_at=at, content=content))
        rows.append(
            SimpleNamespace(message_id=11 + 2 * index, role="assistant", event_at=at, content="noted.")
        )
    return HotSummaryOutput.model_validate_json(_send(litellm, hot_prompt(rows)))


def test_hot_memory_finds_the_status_and_the_decision_not_the_person(litellm: Any) -> None:
    """tests/tasks/test_hot_memory_items.py's team: two typed items, facts are extraction's job."""
    output = _hot(
        litellm,
        "The login page is in progress, about 60% done.",
        "We decided to use Redis because it keeps the stack small.",
        "Riley is our tech lead.",
    )
    got = {(item.kind.value, item.key): item for item in output.items}
    assert set(got) == {("status", "status_login_page"), ("decision", "decision_redis")}
    assert got[("decision", "decision_redis")].value["decision"] == "Redis"
    assert got[("status", "status_login_page")].source_message_ids == [10]
    assert got[("decision", "decision_redis")].source_message_ids == [12]
    assert output.summary and set(output.source_message_ids) <= {10, 12, 14}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("We decided to use Kafka because it scales.", {("decision", "decision_kafka")}),
        ("The admin page is blocked.", {("status", "status_admin_page")}),
    ],
)
def test_hot_memory_of_one_message(litellm: Any, text: str, expected: set[tuple[str, str]]) -> None:
    """The subjects of tests/tasks/test_hot_memory_items.py's refresh command test."""
    assert {(item.kind.value, item.key) for item in _hot(litellm, text).items} == expected
