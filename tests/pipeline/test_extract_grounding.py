"""The small profile's answer keeps only items grounded in the subject's own lines (extract_grounding.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from strataflow.pipeline.extract_grounding import line_item_limit
from strataflow.pipeline.extract_prompt import FULL, SMALL
from strataflow.pipeline.extract_prompt_small import MAX_ITEMS, SmallExtractionOutput
from strataflow.pipeline.scopes import ScopeMessage

SAID = {
    1: "I'm Ana, a nurse in Lisbon. I can't stand olives.",
    2: "我女儿叫小雨。我姐姐是医生。",
    3: "What should I cook tonight?",
    4: "If I moved to Porto I'd be happier.",
    5: "年薪80万，我住在南京。",
    6: "My sister is a lawyer.",
}
CONTEXT = {"lines": {**SAID, 7: "You live in Paris, right?"}, "said": SAID}


def item(line: int, key: str, value: Any) -> dict[str, Any]:
    return {
        "source_message_ids": [line],
        "statement": SAID.get(line, "live in Paris"),
        "kind": "fact",
        "key": key,
        "value": value,
    }


def kept(*items: dict[str, Any]) -> tuple[list[tuple[str, Any]], int]:
    answer = SmallExtractionOutput.model_validate({"items": list(items)}, context=CONTEXT)
    return [(i.key, i.value) for i in answer.items], answer.unsupported


def test_values_stated_by_the_subject_are_kept_in_both_languages() -> None:
    assert kept(
        item(1, "name", "Ana"),
        item(1, "location", "lisbon"),
        item(2, "children", "小雨"),
        item(5, "annual_income", 800000),
        item(5, "location", "南京"),
        item(2, "person_sister", "医生"),
    ) == (
        [
            ("name", "Ana"),
            ("location", "lisbon"),
            ("children", "小雨"),
            ("annual_income", 800000),
            ("location", "南京"),
            ("person_sister", "医生"),
        ],
        0,
    )


def test_invented_copied_and_unsaid_values_are_dropped() -> None:
    assert kept(
        item(1, "job_title", "chef"),
        item(1, "location", "Berlin"),
        item(2, "children", "小明"),
        item(7, "location", "Paris"),
        item(1, "name", "Ana"),
        item(1, "name", "ana"),
    ) == ([("name", "Ana")], 5)


def test_questions_hypotheticals_and_other_peoples_facts_are_dropped() -> None:
    assert kept(
        item(3, "plan", "cook"),
        item(4, "location", "Porto"),
        item(6, "job_title", "lawyer"),
        item(2, "job_title", "医生"),
    ) == ([], 4)


def test_a_line_echoed_as_a_value_is_dropped_and_a_short_line_keeps_its_value() -> None:
    said = {1: "谢谢，帮大忙了。", 2: "Thanks, that helps a lot!", 3: "I'm Ana.", 4: "我叫王芳。"}
    items = [
        (1, "text", "谢谢，帮大忙了"),
        (2, "text", "Thanks, that helps a lot"),
        (3, "name", "Ana"),
        (4, "name", "王芳"),
    ]
    answer = SmallExtractionOutput.model_validate(
        {"items": [{**item(line, key, value), "statement": value} for line, key, value in items]},
        context={"lines": said, "said": said},
    )
    assert [(i.key, i.value) for i in answer.items] == [("name", "Ana"), ("name", "王芳")]
    assert answer.unsupported == 2


def test_a_line_gives_at_most_the_items_its_clauses_and_words_can_state() -> None:
    assert line_item_limit("I'm allergic to penicillin.") == 2
    assert line_item_limit("我在苏州工作。") == 2
    assert line_item_limit("I moved to Lisbon in March and I work as a data engineer at Quintessa.") == 4
    assert (
        line_item_limit("Quick intro: I'm Dev, a product designer at Lumen, from Pune, now in Berlin.") == 6
    )
    said = {1: "I'm allergic to penicillin."}
    copies = [
        {
            "source_message_ids": [1],
            "statement": "allergic",
            "kind": "fact",
            "key": key,
            "value": "penicillin",
        }
        for key in ("allergies", "dislikes", "diet", "health")
    ]
    answer = SmallExtractionOutput.model_validate({"items": copies}, context={"lines": said, "said": said})
    assert [i.key for i in answer.items] == ["allergies", "dislikes"]


def test_the_schema_sent_for_a_batch_allows_the_items_its_subject_lines_can_state() -> None:
    def line(message_id: int, role: str, text: str) -> ScopeMessage:
        return ScopeMessage(message_id, role, text, "h", datetime(2026, 11, 2, tzinfo=UTC), message_id)

    def max_items(batch: list[ScopeMessage]) -> int:
        schema = SMALL.schema_for(batch).model_json_schema()
        return int(schema["properties"]["items"]["maxItems"])

    allergy, intro = (
        line(1, "user", "I'm allergic to penicillin."),
        line(2, "user", "我叫陈静，今年29岁，在成都当中学老师。"),
    )
    reply = line(
        3, "assistant", "Noted: you are allergic to penicillin, and I will remember it for you, Chen."
    )
    assert max_items([allergy]) == 2
    assert max_items([allergy, intro]) == 2 + line_item_limit(intro.content)
    assert max_items([allergy, reply]) == 2  # the assistant's lines are context, not the subject's facts
    assert (
        max_items([line(i, "user", "Married, three kids, in Leeds, a bus driver.") for i in range(9)])
        == MAX_ITEMS
    )
    assert SMALL.schema_for([allergy]).__name__ == SMALL.schema.__name__  # the cache knows the work by name
    assert FULL.schema_for([allergy]) is FULL.schema


def test_a_number_is_kept_only_as_the_sentence_states_it_with_or_without_its_unit() -> None:
    said = {
        1: "I earn around 70k a year.",
        2: "我月薪两万左右。",
        3: "年薪80万，我住在南京。",
        4: "I'm thirty-four.",
    }
    answer = SmallExtractionOutput.model_validate(
        {"items": [
            {**item(1, "annual_income", 70000), "statement": "70k"},
            {**item(1, "monthly_income", 700000), "statement": "70k"},
            {**item(2, "monthly_income", 20000), "statement": "月薪两万"},
            {**item(2, "annual_income", 200000), "statement": "月薪两万"},
            {**item(3, "annual_income", 800000), "statement": "年薪80万"},
            {**item(4, "age", 34), "statement": "thirty-four"},
            {**item(4, "age", "30-35"), "statement": "thirty-four"},
        ]},
        context={"lines": said, "said": said},
    )  # fmt: skip
    kept = [(i.key, i.value) for i in answer.items]
    assert kept == [("annual_income", 70000), ("monthly_income", 20000), ("annual_income", 800000),
                    ("age", 34), ("age", "30-35")]  # fmt: skip


def test_a_persons_item_names_the_person_of_its_sentence_and_a_dislike_needs_a_word_of_disliking() -> None:
    said = {
        1: "我室友是素食主义者。",
        2: "My roommate is vegan, so we cook a lot of tofu.",
        3: "下辈子我想当个海洋生物学家。",
        4: "My manager, Dana, is moving to Singapore next month.",
        5: "Not a fan of cilantro.",
        6: "I work as an electrician in Cork.",
        7: "我不吃香菜。",
        8: "我不太能吃辣。",
    }
    answer = SmallExtractionOutput.model_validate(
        {"items": [
            {**item(1, "person_sister", "素食主义者"), "statement": "素食主义者"},
            {**item(2, "person_sister", "vegan"), "statement": "vegan"},
            {**item(3, "person_sister", "海洋生物学家"), "statement": "海洋生物学家"},
            {**item(4, "person_dana", "Singapore"), "statement": "Singapore"},
            {**item(5, "dislikes", "cilantro"), "statement": "cilantro"},
            {**item(6, "dislikes", "electrician"), "statement": "electrician"},
            {**item(6, "job_title", "electrician"), "statement": "electrician"},
            {**item(7, "dislikes", "香菜"), "statement": "香菜"},
            {**item(8, "dislikes", "辣"), "statement": "辣"},
        ]},
        context={"lines": said, "said": said},
    )  # fmt: skip
    assert [(i.key, i.value) for i in answer.items] == [
        ("person_roommate", "素食主义者"),
        ("person_roommate", "vegan"),
        ("person_dana", "Singapore"),
        ("dislikes", "cilantro"),
        ("job_title", "electrician"),
        ("dislikes", "香菜"),
        ("dislikes", "辣"),
    ]
    assert answer.unsupported == 2
