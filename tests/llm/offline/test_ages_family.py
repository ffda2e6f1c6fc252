"""Ages in words, birth years, universities by short name, marriage and children said directly or in
passing: several phrasings per class, in both languages; vague stays vague and a relative's age is never
the user's."""

from __future__ import annotations

from typing import Any

import pytest

from models.llm import ExtractionOutput
from strataflow.llm.offline.extract import extract_items


def extracted(text: str, existing: frozenset[str] = frozenset()) -> dict[str, Any]:
    items = extract_items(
        [{"id": 1, "role": "user", "time": "2026-05-04T10:00:00+00:00", "text": text}], existing
    )
    ExtractionOutput.model_validate({"items": items})
    return {item["key"]: item["value"] for item in items}


@pytest.mark.parametrize(
    ("text", "age"),
    [
        ("我三十来岁，做销售的", "30+"),
        ("本人四十上下", "35-45"),
        ("我今年五十几", "50-59"),
        ("我六十出头了", "early 60s"),
        ("我五十岁上下", "45-55"),
        ("我30多岁", "30+"),  # seed 000's vague age
        ("Early forties, two kids, one cat", "early 40s"),
        ("I'm in my mid-thirties", "mid 30s"),
        ("Still in my late twenties, believe it or not", "late 20s"),
        ("I am in my fifties", "50s"),
    ],
)
def test_ages_in_words_stay_ranges(text: str, age: str) -> None:
    assert extracted(text)["age"] == age


@pytest.mark.parametrize(
    "text",
    [
        "我儿子今年五岁",
        "我有个女儿，今年八岁",
        "老二才三岁",
        "My daughter just turned 7",
        "I have a son, 9 years old",
        "My wife is in her early thirties",
        "三十来岁的时候我在上海工作",
    ],
)
def test_a_relatives_age_or_a_past_age_is_never_the_users(text: str) -> None:
    assert "age" not in extracted(text)


def test_relatives_ages_go_to_family_members() -> None:
    assert extracted("我女儿今年十二岁")["family_members"] == [{"relation": "女儿", "age": 12}]
    assert extracted("My husband is in his late forties")["family_members"] == [
        {"relation": "husband", "age": "late 40s"}
    ]


@pytest.mark.parametrize(
    ("text", "year"),
    [
        ("我是87年的", 1987),
        ("本人1979年出生", 1979),
        ("出生于1992年，在杭州长大", 1992),
        ("I was born in 1984", 1984),
        ("Born in '95 in Lagos", 1995),
        ("我是80后", "1980-1989"),
        ("作为一个95后", "1995-1999"),
    ],
)
def test_birth_years_and_generations(text: str, year: Any) -> None:
    assert extracted(text)["birth_year"] == year


def test_someone_elses_birth_year_is_not_the_users() -> None:
    assert "birth_year" not in extracted("我老公是83年的")
    assert "birth_year" not in extracted("My son was born in 2018")


@pytest.mark.parametrize(
    ("text", "university"),
    [
        ("我本科读的交大", "上海交通大学"),
        ("我是西安交大毕业的", "西安交通大学"),
        ("我在中大读的硕士", "香港中文大学"),
        ("我是广州人，中大本科毕业", "中山大学"),
        ("浙大毕业，学的电子", "浙江大学"),
        ("港中文MBA毕业", "香港中文大学"),
        ("研究生是在港科大读的", "香港科技大学"),
        ("在理大读的硕士", "香港理工大学"),
        ("本科在城大", "香港城市大学"),
        ("I did my MSc at HKU", "The University of Hong Kong"),
        ("Graduated from NTU with a BEng", "Nanyang Technological University"),
        ("I studied economics at LSE", "London School of Economics and Political Science"),
        ("I have a PhD from CMU", "Carnegie Mellon University"),
        ("我是湖南大学毕业的", "湖南大学"),  # 南大 inside 湖南大学 is not 南京大学
    ],
)
def test_universities_by_short_name(text: str, university: str) -> None:
    assert extracted(text)["university"] == university


def test_a_company_size_is_not_a_university() -> None:
    assert "university" not in extracted("我在一家中大型企业做销售")


@pytest.mark.parametrize(
    ("text", "status"),
    [
        ("我老婆也在深圳上班", "已婚"),
        ("周末我跟我老公去看房", "已婚"),
        ("我爱人在银行工作", "已婚"),
        ("我前妻带着孩子", "离异"),
        ("My wife and I are moving next year", "married"),
        ("My husband works nights", "married"),
        ("My ex-husband lives in Ohio", "divorced"),
        ("My fiancée is a nurse", "engaged"),
    ],
)
def test_marital_status_said_in_passing(text: str, status: str) -> None:
    assert extracted(text)["marital_status"] == status


@pytest.mark.parametrize(
    "text", ["他老婆是老师", "我朋友的老公在香港", "王先生是我们的客户", "His wife is a doctor"]
)
def test_someone_elses_spouse_says_nothing_about_the_user(text: str) -> None:
    assert "marital_status" not in extracted(text)


@pytest.mark.parametrize(
    ("text", "children"),
    [
        ("孩子下个月上幼儿园", "1+"),
        ("我女儿在读初中", "1+"),
        ("我家二宝刚出生", "2+"),
        ("我们家仨娃", None),  # 仨 is not a numeral we read: nothing rather than a guess
        ("三个孩子都在上学", 3),
        ("My son starts school in September", "1+"),
        ("Our kids love the beach", "2+"),
        ("Three kids and a dog keep us busy", 3),
        ("I'm a single dad with two boys", 2),
    ],
)
def test_children_counted_or_mentioned(text: str, children: Any) -> None:
    assert extracted(text).get("children") == children


def test_a_mention_in_passing_never_replaces_a_stated_or_stored_count() -> None:
    items = extract_items(
        [
            {"id": 1, "role": "user", "time": "1", "text": "我有两个孩子"},
            {"id": 2, "role": "user", "time": "2", "text": "孩子都上小学了"},
        ]
    )
    assert {i["key"]: i["value"] for i in items}["children"] == 2
    assert "children" not in extracted("My son loves football", frozenset({"fact:children"}))


@pytest.mark.parametrize(
    ("text", "support"),
    [
        ("家里人都很支持", "支持"),
        ("我老婆不太支持去香港", "不太支持"),
        ("父母反对我们移民", "反对"),
        ("My family is fully supportive", "supportive"),
        ("My parents are against the move", "not supportive"),
        ("My wife isn't really on board", "not supportive"),
    ],
)
def test_family_support(text: str, support: str) -> None:
    assert extracted(text)["family_support"] == support
