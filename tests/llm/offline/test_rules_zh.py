"""Chinese extraction rules over many phrasings: what is stated comes out, vague stays vague, nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from models.llm import ExtractionOutput
from strataflow.llm.offline.extract import extract_items


def extracted(text: str) -> dict[str, Any]:
    """key -> value of everything extracted from one user message (checked against the LLM output schema)."""
    items = extract_items([{"id": 1, "role": "user", "text": text}])
    ExtractionOutput.model_validate({"items": items})
    return {item["key"]: item["value"] for item in items}


def test_the_seed_000_example_comes_out_fully() -> None:
    items = extract_items(
        [
            {
                "id": 7,
                "role": "user",
                "time": "2026-11-02T09:00:00+08:00",
                "text": "我今年32岁，浙大计算机硕士毕业的，现在在杭州做前端开发，工作8年了，年薪大概80万",
            }
        ]
    )
    by_key = {item["key"]: item for item in items}
    assert {key: item["value"] for key, item in by_key.items()} == {
        "age": 32,
        "education": "硕士",
        "university": "浙江大学",
        "major": "计算机",
        "job_title": "前端开发",
        "location": "杭州",
        "years_of_experience": 8,
        "annual_income": 800000,
    }
    assert by_key["annual_income"]["approximate"] is True
    assert by_key["age"]["approximate"] is False
    assert by_key["annual_income"]["statement"] == "年薪大概80万"  # the user's own words
    assert by_key["university"]["statement"] == "浙大计算机硕士毕业的"
    assert all(
        item["source_message_ids"] == [7] and item["kind"] == "fact" and item["importance"] == 70
        for item in items
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "我30多岁，在深圳做产品经理",
            {"age": "30+", "location": "深圳", "job_title": "产品经理"},
        ),  # seed 000 vague age
        ("我今年三十二", {"age": 32}),  # Chinese numerals, no 岁
        (
            "收入的话，一年差不多150万吧",
            {"annual_income": 1500000},
        ),  # income named first, amount per year later
        ("我月入1.5w", {"monthly_income": 15000}),  # chat shorthand w = 万
        ("工作了两年半", {"years_of_experience": 2.5}),  # 半 is half a year, not dropped
        (
            "我是上交的本科，港大的硕士",
            {"education": "硕士", "university": "香港大学"},
        ),  # highest degree wins
        ("我比较倾向于专才", {"target_programs": ["ASMTP"]}),  # leaning towards a program is a target
        ("打算年底前递交高才通申请", {"target_programs": ["TTPS"], "timeline": "年底前"}),
        (
            "32岁了，还没结婚",
            {"age": 32, "marital_status": "未婚"},
        ),  # trailing 了; negated marriage is a status
        ("二十几岁，单身", {"age": "20-29", "marital_status": "未婚"}),  # unknown unit digit stays a range
        ("我二十七八岁", {"age": "27-28"}),  # adjacent digits are a range, not 27.5
        ("我大概35岁", {"age": 35}),  # hedged age stays a number (approximate flag tested below)
        ("我三十出头", {"age": "early 30s"}),  # open phrase, no midpoint
        ("本人今年已经四十五岁", {"age": 45}),  # 本人 + 已经
        ("本科是在复旦读的，学的金融", {"education": "本科", "university": "复旦大学", "major": "金融"}),
        (
            "我是北京大学软件工程专业的博士",
            {"education": "博士", "university": "北京大学", "major": "软件工程"},
        ),
        ("毕业于杭州电子科技大学", {"university": "杭州电子科技大学"}),  # a full name not in the dictionary
        ("博士读的武汉大学，专业是数学", {"education": "博士", "university": "武汉大学", "major": "数学"}),
        (
            "我在字节跳动工作了五年，现在是高级后端工程师",
            {"company": "字节跳动", "years_of_experience": 5, "job_title": "高级后端工程师"},
        ),
        ("我是一名数据分析师，在腾讯上班", {"job_title": "数据分析师", "company": "腾讯"}),
        ("在鹅厂做运营", {"company": "腾讯", "job_title": "运营"}),  # company nickname
        (
            "我在上海一家互联网公司当产品经理",
            {"location": "上海", "industry": "互联网", "job_title": "产品经理"},
        ),
        ("有10年工作经验", {"years_of_experience": 10}),  # experience phrasing
        ("从业十多年了", {"years_of_experience": "10+"}),  # open bound
        ("年薪50万左右", {"annual_income": 500000}),  # hedge after the amount
        ("年薪税前八十多万", {"annual_income": "800000+"}),  # an open bound stays a string
        ("本人男，32周岁，已婚未育", {"age": 32, "marital_status": "已婚", "children": 0}),
        ("我英语雅思7分", {"language_scores": {"IELTS": 7}}),
        ("大家好，我是张伟", {"name": "张伟"}),  # a self-introduction names the user
        ("我姓李，叫李小龙", {"name": "李小龙"}),
        ("联系我：138 1234 5678", {"phone": "13812345678"}),  # spaced mobile number
        ("我是阿里的员工", {"company": "阿里巴巴"}),
        ("我结婚三年了，有个儿子", {"marital_status": "已婚", "children": 1}),  # 有个 = one
        ("我的微信号是 abc_123", {"wechat": "abc_123"}),
        ("年收入一百二十万", {"annual_income": 1200000}),  # Chinese numerals with 万
        ("月薪3万5", {"monthly_income": 35000}),  # colloquial tail
        ("预算大概200万港币", {"budget": 2000000}),  # budget with currency
        ("已婚，有两个孩子", {"marital_status": "已婚", "children": 2}),
        ("我们是丁克，没有孩子", {"children": 0}),
        (
            "我叫王磊，手机13812345678，邮箱wanglei@qq.com",
            {"name": "王磊", "phone": "13812345678", "email": "wanglei@qq.com"},
        ),
        ("现居魔都", {"location": "上海"}),  # city nickname
        ("我是杭州人，现在住在北京", {"hometown": "杭州", "location": "北京"}),  # hometown is not location
        ("我想申请优才，明年上半年递交", {"target_programs": ["QMAS"], "timeline": "明年上半年"}),
        ("打算走高才通或者专才", {"target_programs": ["TTPS", "ASMTP"]}),
        ("考虑资本投资者入境计划", {"target_programs": ["CIES"]}),
        ("我已经拿到IANG了", {"current_visa": "IANG"}),  # held, not targeted
        ("平时主要用Python和Go，也熟悉Kubernetes", {"tools": ["Python", "Go", "Kubernetes"]}),
        (
            "我更喜欢微信沟通，不喜欢打电话",
            {"preference_contact_method": {"prefers": "微信沟通", "over": "打电话"}},
        ),
    ],
)
def test_stated_facts_are_extracted(text: str, expected: dict[str, Any]) -> None:
    got = extracted(text)
    assert {key: got.get(key) for key in expected} == expected


@pytest.mark.parametrize(
    ("text", "absent"),
    [
        (
            "我老婆是博士，她在北大工作",
            {"education", "university", "company"},
        ),  # about the wife, not the user
        ("硕士能申请高才通吗？", {"education", "target_programs"}),  # a question states nothing
        ("我不是博士", {"education"}),  # negated
        ("我想读博士", {"education"}),  # a plan is not a degree
        ("以前在北京工作过", {"location"}),  # the past is not the current city
        ("你今年多大？", {"age"}),  # a question
        ("我儿子今年5岁", {"age"}),  # the son's age
        ("优才难申请吗", {"target_programs"}),  # asking about a program is not an intent
        ("我不考虑投资移民", {"target_programs"}),  # negated intent
        ("跟我对接的是王经理", {"job_title"}),  # 王经理 addresses a person
        ("我是杭州人", {"name", "location"}),  # a hometown, neither a name nor the current city
        ("你们的服务真的很专业", {"major"}),  # 很专业 is praise, not a major
        ("我想了解一下优才的条件", {"target_programs"}),  # asking about a program is not choosing it
        ("我在平安做了6年精算师", {"status_u5728_u5e73u5b89"}),  # years worked are not a progress figure
        ("我有两个孩子，大的8岁", {"age"}),  # the older child's age
        ("白天不太方便接电话", {"feedback_general"}),  # a constraint, not an opinion of a product
    ],
)
def test_what_is_not_stated_is_not_extracted(text: str, absent: set[str]) -> None:
    assert not absent & set(extracted(text))


@pytest.mark.parametrize(
    ("text", "key", "approximate"),
    [
        ("年薪大概80万", "annual_income", True),  # 大概
        ("我大约40岁", "age", True),  # 大约
        ("工作差不多5年了", "years_of_experience", True),  # 差不多
        ("年薪80万", "annual_income", False),  # exact
    ],
)
def test_hedged_numbers_are_marked_approximate(text: str, key: str, approximate: bool) -> None:
    items = {item["key"]: item for item in extract_items([{"id": 1, "role": "user", "text": text}])}
    assert items[key]["approximate"] is approximate


def test_only_user_messages_are_read_and_the_newest_value_wins() -> None:
    items = extract_items(
        [
            {
                "id": 1,
                "role": "assistant",
                "time": "2026-11-01T09:00:00",
                "text": "您是32岁吗？在杭州工作吗？",
            },
            {"id": 3, "role": "user", "time": "2026-11-03T09:00:00", "text": "我搬到深圳了"},
            {"id": 2, "role": "user", "time": "2026-11-02T09:00:00", "text": "我住在杭州"},
        ]
    )
    assert [(item["key"], item["value"], item["source_message_ids"]) for item in items] == [
        ("location", "深圳", [3])
    ]
