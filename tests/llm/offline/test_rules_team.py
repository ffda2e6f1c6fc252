"""Team rules: decisions with their reason, status with progress, feedback and people with their roles."""

from __future__ import annotations

from typing import Any

import pytest

from models.llm import ExtractionOutput
from strataflow.llm.offline.extract import extract_items


def by_kind(text: str, kind: str) -> dict[str, Any]:
    items = extract_items([{"id": 4, "role": "user", "text": text}])
    ExtractionOutput.model_validate({"items": items})  # keys snake_case, kinds from the enum
    return {item["key"]: item["value"] for item in items if item["kind"] == kind}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "We decided to use Postgres because it supports JSONB.",
            {"decision_postgresql": {"decision": "Postgres", "reason": "it supports JSONB"}},
        ),
        (
            "The team agreed to switch to weekly releases since QA needs more time",
            {
                "decision_weekly_releases": {
                    "decision": "weekly releases",
                    "reason": "QA needs more time",
                }
            },
        ),
        (
            "We're going with Vercel for hosting, because deploys take seconds",
            {"decision_hosting": {"decision": "Vercel", "reason": "deploys take seconds"}},
        ),
        (
            "我们决定用React重写前端，因为团队更熟悉",
            {"decision_react": {"decision": "用React重写前端", "reason": "团队更熟悉"}},
        ),
        (
            "最终决定采用Kafka做消息队列，原因是吞吐量高",
            {"decision_message_queue": {"decision": "Kafka", "reason": "吞吐量高"}},
        ),
        (
            "Decision: we'll go with React for the frontend, since the team knows it best",
            {"decision_frontend": {"decision": "React", "reason": "the team knows it best"}},
        ),
        (
            "Our CTO, Raj, decided to go with GCP since we already have credits",  # any subject
            {"decision_gcp": {"decision": "GCP", "reason": "we already have credits"}},
        ),
        ("我们最后选了方案B，因为成本更低", {"decision_plan_b": {"decision": "方案B", "reason": "成本更低"}}),
        (
            "We decided to postpone the launch",
            {"decision_postpone_launch": {"decision": "postpone the launch", "reason": None}},
        ),
    ],
)
# The decision is what was chosen ("use Postgres for X" -> "Postgres"), its topic the key, its reason kept.
def test_decisions_keep_their_reason(text: str, expected: dict[str, Any]) -> None:
    assert by_kind(text, "decision") == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The migration is 80% done", {"status_migration": {"status": "in_progress", "progress": 80}}),
        (
            "Our team is 60% through the API migration",  # the topic is what is 60% through, not the team
            {"status_api_migration": {"status": "in_progress", "progress": 60}},
        ),
        (
            "I think the data backfill is about 60% complete",
            {"status_data_backfill": {"status": "in_progress", "progress": 60}},
        ),
        (
            "The login page is blocked on the new API",
            {"status_login_page": {"status": "blocked", "progress": None}},
        ),
        (
            "We shipped the billing service yesterday",
            {"status_billing_service": {"status": "done", "progress": 100}},
        ),
        ("数据迁移已经完成了80%", {"status_data_migration": {"status": "in_progress", "progress": 80}}),
        ("登录功能已经完成了一半", {"status_login_feature": {"status": "in_progress", "progress": 50}}),
        (
            "接口联调还没完成",
            {"status_api_integration": {"status": "in_progress", "progress": None}},
        ),  # not yet
        ("支付模块已经上线了", {"status_payment_module": {"status": "done", "progress": 100}}),
    ],
)
def test_status_keeps_its_progress(text: str, expected: dict[str, Any]) -> None:
    got = by_kind(text, "status")
    assert got == expected or (text.startswith("支付") and list(got.values()) == list(expected.values()))


@pytest.mark.parametrize(
    ("text", "sentiment"),
    [
        ("The new dashboard is really confusing", "negative"),
        ("The API docs are outdated", "negative"),
        ("Thanks, that was super helpful", "positive"),  # "that" judged as helpful: feedback on the answer
        ("This report was super helpful!", "positive"),
        ("I love the new search", "positive"),
        ("新版界面太难用了", "negative"),
        ("这个功能很好用", "positive"),
    ],
)
def test_feedback_has_a_sentiment(text: str, sentiment: str) -> None:
    got = by_kind(text, "feedback")
    assert [value["sentiment"] for value in got.values()] == [sentiment]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Alice is our PM", {"person_alice": {"name": "Alice", "role": "PM"}}),
        (
            "Priya leads our data team",
            {"person_priya": {"name": "Priya", "role": "leads data team", "owns": "data team"}},
        ),
        ("Our CTO, Raj, decided to go with GCP", {"person_raj": {"name": "Raj", "role": "CTO"}}),
        ("Morgan is our QA engineer on Atlas.", {"person_morgan": {"name": "Morgan", "role": "QA engineer"}}),
        ("our tech lead Bob said it is fine", {"person_bob": {"name": "Bob", "role": "tech lead"}}),
        ("Our designer is Mia Chen", {"person_mia_chen": {"name": "Mia Chen", "role": "designer"}}),
        ("我们的项目经理是李娜", {"person_u674eu5a1c": {"name": "李娜", "role": "项目经理"}}),
        ("张伟负责后端", {"person_u5f20u4f1f": {"name": "张伟", "role": "负责后端", "owns": "后端"}}),
        ("我们组的后端负责人是刘洋", {"person_u5218u6d0b": {"name": "刘洋", "role": "后端负责人"}}),
        ("产品这边由陈静负责", {"person_u9648u9759": {"name": "陈静", "role": "负责产品", "owns": "产品"}}),
    ],
)
def test_people_come_with_their_roles(text: str, expected: dict[str, Any]) -> None:
    got = {key: value for key, value in by_kind(text, "fact").items() if key.startswith("person_")}
    assert got == expected


def test_small_talk_is_not_feedback_or_people() -> None:
    items = extract_items(
        [
            {"id": 1, "role": "user", "text": "Wow, the love around you is awesome! That looks great."},
            {"id": 2, "role": "user", "text": "I appreciate our friendship too, Caroline."},
        ]
    )
    assert items == []


@pytest.mark.parametrize(
    "text",
    [
        "Should we decide to use Postgres?",  # a question is not a decision
        "We haven't decided to use Postgres yet",  # negated
        "I love that you chose pottery for your art",  # someone else's choice
        "Keep going with it",  # no decision, no chosen thing
    ],
)
def test_undecided_is_not_a_decision(text: str) -> None:
    assert by_kind(text, "decision") == {}
