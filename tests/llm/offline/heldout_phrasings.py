"""Held-out phrasings for the offline extraction rules, written BEFORE the generalisation work of issue 15
item 4 and never used to tune the rules: run it only to measure recall.

    python -m tests.llm.offline.heldout_phrasings

Each case is one user message and the values it should give (key -> expected value, or a predicate over
the value); NOT lists keys that must not appear. Recall = expected values found / expected values;
precision failures (a NOT key present) are counted separately. Not collected by pytest (no test_ prefix).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

Check = Any  # an expected value, or a predicate over the extracted value


def has(*words: str) -> Callable[[Any], bool]:
    """The value (any JSON shape) mentions every word, case-insensitive."""
    return lambda value: all(word.lower() in str(value).lower() for word in words)


def tool(name: str) -> Callable[[Any], bool]:
    return lambda value: isinstance(value, list) and name in value


def not_exact_number(value: Any) -> bool:
    return isinstance(value, str)


# (text, {key: expected}, [keys that must NOT be extracted])
CASES: list[tuple[str, dict[str, Check], list[str]]] = [
    # approximate ages in words
    ("我四十来岁，在苏州做外贸", {"age": "40+", "location": "苏州"}, []),
    ("本人六十上下，已经退休了", {"age": "55-65"}, []),
    ("我五十出头了", {"age": "early 50s"}, []),
    ("I'm in my late forties and live in Leeds", {"age": "late 40s", "location": "Leeds"}, []),
    ("Mid-twenties, working in retail", {"age": "mid 20s"}, []),
    ("I am in my early sixties now", {"age": "early 60s"}, []),
    ("My husband is in his mid-fifties", {"marital_status": "married"}, ["age"]),
    ("我老公五十多了，我四十出头", {"age": "early 40s", "marital_status": "已婚"}, []),
    # birth years
    ("我是88年的，现在在成都", {"birth_year": 1988, "location": "成都"}, []),
    ("I was born in 1979 in Glasgow", {"birth_year": 1979}, []),
    ("我95年出生", {"birth_year": 1995}, []),
    ("我是00后", {"birth_year": "2000-2009"}, []),
    # child's age is not the user's age
    ("我女儿今年七岁，刚上一年级", {"children": has("1")}, ["age"]),
    ("My son just turned 4", {"children": has("1")}, ["age"]),
    ("老大十岁了，老二才两岁", {}, ["age"]),
    # universities by short name
    ("我本科是交大的，学的机械", {"university": "上海交通大学", "major": "机械"}, []),
    ("研究生在城大读的", {"university": "香港城市大学"}, []),
    ("我北大中文系毕业", {"university": "北京大学"}, []),
    ("港科大博士毕业", {"university": "香港科技大学", "education": "博士"}, []),
    ("我在理大读了个硕士", {"university": "香港理工大学", "education": "硕士"}, []),
    ("I did my master's at LSE", {"university": "London School of Economics and Political Science"}, []),
    ("Graduated from NUS in 2015", {"university": "National University of Singapore"}, []),
    ("I studied at UCL for my undergrad", {"university": "University College London"}, []),
    ("I went to CMU for grad school", {"university": "Carnegie Mellon University"}, []),
    ("复旦新闻系本科毕业的", {"university": "复旦大学", "education": "本科"}, []),
    ("我是中科大物理系的", {"university": "中国科学技术大学"}, []),
    ("我在中大读的MBA，后来留港工作", {"university": "香港中文大学"}, []),
    # marital status and children, direct and in passing
    ("我跟我媳妇下个月去香港看房", {"marital_status": "已婚"}, []),
    ("我爱人是医生", {"marital_status": "已婚"}, ["job_title"]),
    ("My wife and I both work in tech", {"marital_status": "married"}, []),
    ("We've got three kids under ten", {"children": 3}, []),
    ("Two kids, one dog, and a mortgage", {"children": 2}, []),
    ("I'm divorced with a teenage daughter", {"marital_status": "divorced", "children": 1}, []),
    ("孩子明年上初中了", {"children": has("1")}, []),
    ("我们家俩娃，一个上幼儿园一个上小学", {"children": 2}, []),
    ("我还是单身，没孩子", {"marital_status": "未婚", "children": 0}, []),
    ("My ex-wife has the kids on weekends", {"marital_status": "divorced"}, []),
    # amounts with units, per year or month, currency kept
    ("税前年薪45w左右", {"annual_income": 450000}, []),
    ("月薪两万八，另外有年终奖", {"monthly_income": 28000}, []),
    ("年包大概90个", {"annual_income": 900000}, []),
    ("我一年能拿150万港币", {"annual_income": 1500000, "income_currency": "HKD"}, []),
    ("I make about £65k a year", {"annual_income": 65000, "income_currency": "GBP"}, []),
    ("Take-home is $9,500 a month", {"monthly_income": 9500, "income_currency": "USD"}, []),
    ("Our budget is around 800k HKD for the flat", {"budget": 800000, "budget_currency": "HKD"}, []),
    ("预算五百万人民币左右", {"budget": 5000000, "budget_currency": "CNY"}, []),
    ("可以拿出3000万港币做投资", {"investment_amount": 30000000}, []),
    ("I can invest roughly 30 million HKD", {"investment_amount": 30000000}, []),
    # people in work talk with their role and what they own
    ("Marco from legal owns the vendor contracts", {"person_marco": has("Marco", "vendor contracts")}, []),
    ("Our tech lead Anika is responsible for the CI pipeline", {"person_anika": has("Anika", "CI")}, []),
    ("我们老板老李负责预算审批", {"person_*": has("老李", "预算")}, []),
    ("产品那边小陈负责需求文档", {"person_*": has("小陈", "需求文档")}, []),
    ("My manager, Tom Reyes, signs off on releases", {"person_tom_reyes": has("Tom Reyes")}, []),
    # technologies with versions
    ("We're on Python 3.12 and Django 5", {"tools": lambda v: "Python 3.12" in v and "Django 5" in v}, []),
    ("后端用的是Java 17加Spring Boot 3", {"tools": tool("Java 17")}, []),
    ("The app runs on Node 20 with PostgreSQL 15", {"tools": tool("PostgreSQL 15")}, []),
    ("前端升级到了Vue 3", {"tools": tool("Vue 3")}, []),
    # communication form and timing
    ("Please keep answers brief", {"preference_response_length": has("short")}, []),
    ("Use bullet points when you summarise", {"preference_format": has("bullet")}, []),
    ("回复尽量简短一点", {"preference_response_length": has("短")}, []),
    ("用列表的形式给我就行", {"preference_format": has("列表")}, []),
    ("晚上十点以后别给我打电话", {"preference_contact_time": has("十点")}, []),
    ("No calls on weekends please", {"preference_contact_time": has("weekend")}, []),
    ("Text me rather than calling", {"preference_contact_method": has("text")}, []),
    ("工作日白天发微信就好", {"preference_contact_method": has("微信")}, []),
    # colon-led lists
    (
        "Quick background: 38, married, two kids, based in Denver",
        {"age": 38, "marital_status": "married", "children": 2, "location": "Denver"},
        [],
    ),
    (
        "我的情况：37岁，已婚，一个孩子，在广州",
        {"age": 37, "marital_status": "已婚", "children": 1, "location": "广州"},
        [],
    ),
    ("My stack: Go 1.22, Redis 7, Kubernetes", {"tools": tool("Redis 7")}, []),
    # seed 000 vocabulary additions
    ("我已经拿到香港一家公司的offer了", {"has_hk_employer": True}, []),
    ("I don't have an employer in Hong Kong yet", {"has_hk_employer": False}, []),
    ("我是理工科背景，一直做技术", {"has_tech_background": True}, []),
    ("家里人都挺支持我们去香港的", {"family_support": has("支持")}, ["marital_status"]),
    ("My parents aren't keen on the move", {"family_support": has("not")}, []),
    # the seed example and vague age must hold
    (
        "我今年32岁，浙大计算机硕士毕业的，现在在杭州做前端开发，工作8年了，年薪大概80万",
        {"age": 32, "university": "浙江大学", "annual_income": 800000},
        [],
    ),
    ("我30多岁，在深圳做产品经理", {"age": "30+"}, []),
]


def _matches(expected: Check, value: Any) -> bool:
    if callable(expected):
        try:
            return bool(expected(value))
        except Exception:
            return False
    return value == expected


def run() -> dict[str, Any]:
    from strataflow.llm.offline.extract import extract_items

    found = expected_total = 0
    wrong: list[str] = []
    misses: list[str] = []
    hex_keys: list[str] = []
    for text, expected, forbidden in CASES:
        items = extract_items([{"id": 1, "role": "user", "time": "2026-05-04T10:00:00+00:00", "text": text}])
        got = {item["key"]: item["value"] for item in items}
        for key, check in expected.items():
            expected_total += 1
            if key.endswith("*"):
                hit = any(k.startswith(key[:-1]) and _matches(check, v) for k, v in got.items())
            else:
                hit = key in got and _matches(check, got[key])
            if hit:
                found += 1
            else:
                misses.append(
                    f"{text!r}: {key} expected {check if not callable(check) else '~'} got {got.get(key)!r}"
                )
        for key in forbidden:
            if key in got:
                wrong.append(f"{text!r}: {key}={got[key]!r} should not be extracted")
        hex_keys += [f"{text!r}: {k}" for k in got if re.search(r"(?:^|_)u[0-9a-f]{4}", k)]
    return {
        "recall": round(found / expected_total, 3),
        "found": found,
        "expected": expected_total,
        "forbidden_present": len(wrong),
        "misses": misses,
        "wrong": wrong,
        "hex_keys": hex_keys,
    }


if __name__ == "__main__":
    import json

    report = run()
    for line in report["misses"] + report["wrong"] + report["hex_keys"]:
        print(line)
    print(json.dumps({k: report[k] for k in ("recall", "found", "expected", "forbidden_present")}))
