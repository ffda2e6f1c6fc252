"""The small profile's answer keeps only items grounded in the subject's own lines (extract_grounding.py)."""

from __future__ import annotations

from typing import Any

from strataflow.pipeline.extract_prompt_small import SmallExtractionOutput

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
