"""bench.extraction: its labelled cases, the matching rule that scores an answer, and a small run through the
real ingest and extraction stage with the offline provider."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import Engine

from bench.extraction import json_valid, read_items, run_days, subject_of
from bench.extraction_cases import Case, Others, leaves, load_cases, matches, score_case, summary
from bench.model_server import extraction_settings
from strataflow.config import Settings
from tests.fixtures.scripted_model import ScriptedModel, fact


def item(key: str, value: Any, statement: str = "") -> dict[str, Any]:
    return {"kind": "fact", "key": key, "value": value, "statement": statement}


def test_the_cases_cover_both_languages_every_shape_and_hold_a_quarter_back() -> None:
    cases = load_cases()
    by_language = Counter(case.language for case in cases)
    assert len(cases) >= 200 and by_language["en"] >= 80 and by_language["zh"] >= 80
    for language in ("en", "zh"):
        held = sum(case.held_back for case in cases if case.language == language)
        assert 0.15 <= held / by_language[language] <= 0.35
    tags = Counter(tag for case in cases for tag in case.tags)
    for shape in ("single", "several", "turns", "update", "negation", "others", "hypothetical", "question",
                  "assistant", "relative_date", "number", "small_talk"):  # fmt: skip
        assert tags[shape] >= 6, shape
    assert tags["real_model"] == 22  # bench.real_model's cases are measured here too
    assert sum(case.nothing for case in cases) >= 40
    assert all(case.values for case in cases if case.update)  # an update names its new value


def test_a_value_matches_its_forms_but_not_a_sentence_echoed() -> None:
    assert matches("senior data engineer", "data engineer")
    assert matches("Edinburgh", "University of Edinburgh")
    assert matches("Korean drama", "Korean dramas")
    assert not matches(
        "I moved to Lisbon in March and I work as a data engineer at Quintessa", "data engineer"
    )
    assert not matches("engineer", "senior data engineer")  # one word of three is not the value
    assert (
        matches("80万", 800000) and matches("1,450 euros", 1450) and matches("35岁", 35) and matches(29.0, 29)
    )
    assert not matches("I was 35 when we moved to a bigger flat in town", 35)
    assert matches("高级产品经理", "产品经理") and matches("浙江大学", "浙江大学")
    assert not matches("我已经从美团离职了上个月去了京东", "京东")  # a clause is not a company
    assert not matches("张伟", "张玮")


def test_leaves_skip_descriptors_booleans_and_nulls() -> None:
    value = {"name": "Leo", "relation": "son", "age": 4, "twin": False, "school": None, "per": "month"}
    assert leaves(value) == ["Leo", 4]
    assert leaves([{"dislikes": "jazz"}, "tea"]) == ["jazz", "tea"]


def test_another_persons_fact_is_right_only_on_an_item_that_names_them() -> None:
    case = Case("t-sister", "en", ("others",), (), values=(("Clara",),),
                others=(Others(("sister", "clara"), (("nurse",), ("Madrid",))),))  # fmt: skip
    attributed = score_case(case, [item("person_clara", {"name": "Clara", "job": "nurse"})])
    assert attributed.wrong == [] and attributed.found == 1
    misattributed = score_case(case, [item("job_title", "nurse"), item("location", "Madrid")])
    assert misattributed.right == [] and len(misattributed.wrong) == 2 and misattributed.missed == ["Clara"]


def test_an_update_is_right_only_without_the_stale_value_and_nothing_means_no_item() -> None:
    case = Case("t-move", "en", ("update",), (), values=(("Munich",),), stale=(("Hamburg",),))
    assert score_case(case, [item("location", "Munich")]).update_ok is True
    both = score_case(case, [item("location", "Munich"), item("previous_city", "Hamburg")])
    assert both.update_ok is False and both.wrong == ["previous_city=Hamburg"]
    quiet = Case("t-hello", "en", ("small_talk",), ())
    assert score_case(quiet, []).nothing_ok is True
    spoke = score_case(quiet, [item("greeting", "Good morning")])
    assert spoke.nothing_ok is False and summary([spoke])["precision"] == 0.0


def test_a_run_extracts_day_by_day_through_the_stage(
    settings: Settings, engine: Engine, namespace: str
) -> None:
    chosen = {
        case.id: case
        for case in load_cases()
        if case.id in ("en-city-dublin", "en-talk-morning", "en-upd-phone")
    }
    cases = list(chosen.values())
    run_days(settings, engine, namespace, cases)
    items = read_items(engine, namespace)
    scores = {case.id: score_case(case, items.get(subject_of(case), [])) for case in cases}
    assert scores["en-city-dublin"].found == 1 and scores["en-talk-morning"].nothing_ok is True
    phone = items[subject_of(chosen["en-upd-phone"])]  # day 2's number replaced day 1's on the same item
    assert [i["value"] for i in phone if i["key"] == "phone"] == ["5550199"]
    assert scores["en-upd-phone"].update_ok is True


def test_a_served_model_is_measured_through_http_and_its_invalid_answers_count(
    scripted_model: ScriptedModel, settings: Settings, engine: Engine, namespace: str
) -> None:
    cases = [case for case in load_cases() if case.id in ("en-city-dublin", "en-talk-morning")]
    scripted_model.says("Dublin", fact("location", "Dublin"))
    scripted_model.server.script = [(200, "not JSON"), (200, "still not JSON")]  # the first answer, repaired
    with extraction_settings(settings, "scripted", scripted_model.server.url) as served:
        assert served.extract_model == "openai/scripted" and served.llm_response_format == "json_object"
        run_days(served, engine, namespace, cases)
    assert json_valid(engine, namespace, {subject_of(case) for case in cases}) == (0.5, 2)
    assert len(scripted_model.server.requests) == 3  # the failed answer took a request and its repair
