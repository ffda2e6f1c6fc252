"""Amounts with units and currency, people in work talk, technologies with versions, communication form and
timing, HK employer and tech background, colon-led lists: several invented phrasings per class."""

from __future__ import annotations

from typing import Any

import pytest

from models.llm import ExtractionOutput
from strataflow.llm.offline.extract import extract_items


def extracted(text: str) -> dict[str, Any]:
    items = extract_items([{"id": 1, "role": "user", "time": "2026-05-04T10:00:00+00:00", "text": text}])
    ExtractionOutput.model_validate({"items": items})
    return {item["key"]: item["value"] for item in items}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("税后年薪35w", {"annual_income": 350000}),
        ("月薪4万2", {"monthly_income": 42000}),
        ("年包大概200个", {"annual_income": 2000000}),  # 个 = 万 after a pay word
        ("一年差不多能挣60万人民币", {"annual_income": 600000, "income_currency": "CNY"}),
        ("月薪8万港币左右", {"monthly_income": 80000, "income_currency": "HKD"}),
        ("预算一千万港币以内", {"budget": 10000000, "budget_currency": "HKD"}),
        ("能投资5000万港币", {"investment_amount": 50000000, "budget_currency": "HKD"}),
        ("学费一年大概25万", {"price_tuition": {"amount": 250000, "currency": None, "per": "year"}}),
        ("I'm on $145k a year", {"annual_income": 145000, "income_currency": "USD"}),
        ("My salary is 90,000 GBP", {"annual_income": 90000, "income_currency": "GBP"}),
        ("I earn about 6k EUR a month", {"monthly_income": 6000, "income_currency": "EUR"}),
        ("Our budget is 1.5 million HKD", {"budget": 1500000, "budget_currency": "HKD"}),
        ("I could invest up to 40 million HKD", {"investment_amount": 40000000, "budget_currency": "HKD"}),
        ("Rent is $2,800 a month", {"price_rent": {"amount": 2800, "currency": "USD", "per": "month"}}),
    ],
)
def test_amounts_keep_units_period_and_currency(text: str, expected: dict[str, Any]) -> None:
    assert expected.items() <= extracted(text).items()


@pytest.mark.parametrize(
    "text", ["拿出100万买房", "我们公司有120个人", "月薪多少合适？", "How much is a flat?"]
)
def test_amounts_that_are_not_income_budget_or_investment(text: str) -> None:
    keys = set(extracted(text))
    assert not keys & {"annual_income", "monthly_income", "budget", "investment_amount"}


@pytest.mark.parametrize(
    ("text", "person"),
    [
        ("Lena from procurement owns the supplier list", {"name": "Lena", "team": "procurement"}),
        ("Our designer Kofi handles the icon set", {"name": "Kofi", "role": "designer", "owns": "icon set"}),
        ("My boss, Dana Wu, approves all hires", {"name": "Dana Wu", "role": "boss", "owns": "hires"}),
        ("Ravi manages the billing service", {"name": "Ravi", "owns": "billing service"}),
        ("我们项目经理小周负责排期", {"name": "小周", "role": "项目经理", "owns": "排期"}),
        ("运维那边老赵负责监控告警", {"name": "老赵", "team": "运维", "owns": "监控告警"}),
        ("客户王总对接合同", {"name": "王总", "owns": "合同"}),
    ],
)
def test_people_with_role_team_and_what_they_own(text: str, person: dict[str, str]) -> None:
    people = [value for key, value in extracted(text).items() if key.startswith("person_")]
    assert len(people) == 1 and person.items() <= people[0].items()


@pytest.mark.parametrize(
    ("text", "tools"),
    [
        ("We just moved to PostgreSQL 17", ["PostgreSQL 17"]),
        ("The service is Python 3.10 on Kubernetes 1.28", ["Python 3.10", "Kubernetes 1.28"]),
        ("前端用的Vue3，后端是Go 1.21", ["Vue 3", "Go 1.21"]),
        ("还在用Java 8和MySQL 5.7", ["Java 8", "MySQL 5.7"]),
        ("I've used Python for 6 years", ["Python"]),  # a duration is not a version
        ("我用Java 5年了", ["Java"]),
    ],
)
def test_technologies_keep_their_versions(text: str, tools: list[str]) -> None:
    assert extracted(text)["tools"] == tools


@pytest.mark.parametrize(
    ("text", "key", "expected"),
    [
        ("Keep replies short please", "preference_response_length", {"prefers": "short"}),
        ("Give me the detailed version", "preference_response_length", None),
        ("I like detailed answers", "preference_response_length", {"prefers": "detailed"}),
        ("能不能说重点", "preference_response_length", {"prefers": "简短"}),
        ("请用要点的形式回复", "preference_format", {"prefers": "要点"}),
        ("Numbered lists work for me, please", "preference_format", {"prefers": "numbered lists"}),
        ("No markdown please, plain text", "preference_format", {"avoid": "markdown"}),
        (
            "Email me rather than calling",
            "preference_contact_method",
            {"prefers": "email", "over": "calling"},
        ),
        ("WhatsApp works best", "preference_contact_method", {"prefers": "whatsapp"}),
        ("有事发邮件就行", "preference_contact_method", {"prefers": "邮件"}),
        (
            "Please don't text me on Sundays",
            "preference_contact_time",
            {"when": "on Sundays", "avoid": "text"},
        ),
        ("Only Slack after 7pm", "preference_contact_time", {"when": "after 7pm", "only": "slack"}),
        ("周六周日不要给我发消息", "preference_contact_time", {"when": "周六周日", "avoid": "发消息"}),
        ("下午三点以后比较方便", "preference_contact_time", {"when": "下午三点以后", "prefers": "联系"}),
    ],
)
def test_communication_form_and_timing(text: str, key: str, expected: Any) -> None:
    assert extracted(text).get(key) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("香港那边的公司已经给了我offer", {"has_hk_employer": True}),
        ("目前还没有香港雇主", {"has_hk_employer": False}),
        ("I've got an offer from an HK bank", {"has_hk_employer": True}),
        ("We have no employer in Hong Kong", {"has_hk_employer": False}),
        ("我是计算机背景的", {"has_tech_background": True}),
        ("我不是技术背景", {"has_tech_background": False}),
        ("I come from an engineering background", {"has_tech_background": True}),
    ],
)
def test_seed_000_fields_stated_either_way(text: str, expected: dict[str, Any]) -> None:
    assert expected.items() <= extracted(text).items()


def test_wanting_an_hk_employer_is_not_having_one() -> None:
    assert "has_hk_employer" not in extracted("我想找一个香港雇主")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "A bit about me: 44, widowed, three kids, living in Perth",
            {"age": 44, "children": 3, "location": "Perth"},
        ),
        (
            "基本情况：41岁，离异，两个孩子，在成都",
            {"age": 41, "marital_status": "离异", "children": 2, "location": "成都"},
        ),
        ("Location: Lisbon", {"location": "Lisbon"}),
        ("学历：博士", {"education": "博士"}),
        ("年薪：80万", {"annual_income": 800000}),
    ],
)
def test_colon_led_lists_and_labelled_lines(text: str, expected: dict[str, Any]) -> None:
    assert expected.items() <= extracted(text).items()


def test_a_colon_list_about_someone_else_is_not_the_users() -> None:
    assert "age" not in extracted("My wife: 39, teacher, loves hiking")


def test_chinese_topics_use_english_words_where_one_fits() -> None:
    keys = set(extracted("我打算明年换个城市，想给孩子找个好学校"))
    assert all(not key.split("_")[-1].startswith("u") or not key[-4:].isalnum() for key in keys)
    assert any("city" in key or "school" in key or "children" in key for key in keys)
