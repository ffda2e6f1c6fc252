"""Context builder (seed 001 getContextForPrompt / seed 003 prefetch): intent rules, L2/L3 preference, today's
perceptual memory, provenance, and the token budget counted exactly with litellm.token_counter."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import Engine, text
from typer.testing import CliRunner

from strataflow.config import Settings
from strataflow.retrieval.context import build_context, classify_intent


@pytest.mark.parametrize(
    ("query", "intent"),
    [
        ("What happened last week?", "recap"),  # the canonical recap
        ("Can you give me a quick recap of the project so far", "recap"),  # recap / so far
        ("what did we decide recently about the dashboard", "recap"),  # "what did we decide" + recently
        ("总结一下最近的进展", "recap"),  # Chinese: summary + recent + progress
        ("上周发生了什么？", "recap"),  # Chinese: last week, what happened
        ("How old am I?", "fact"),  # a profile question
        ("Where does the user work?", "fact"),  # wh-question about a person
        ("我在哪家公司工作？", "fact"),  # Chinese: which company
        ("我的学历是什么", "fact"),  # Chinese: my education
        ("Draft a polite reply to the landlord", "other"),  # a task, no memory question
        ("谢谢你", "other"),  # thanks
    ],
)
def test_classify_intent_follows_the_documented_rules(query: str, intent: str) -> None:
    assert classify_intent(query) == intent


def _tokens(value: str) -> int:
    import litellm

    return int(litellm.token_counter(text=value))


def _context(engine: Engine, settings: Settings, data: Any, subject: str, query: str, **kwargs: Any) -> Any:
    with engine.connect() as conn:
        return build_context(conn, settings, data.namespace, subject, query, **kwargs)


def test_recap_question_gets_the_weekly_report_first(
    engine: Engine, settings: Settings, access_data: Any
) -> None:
    result = _context(engine, settings, access_data, "u_en", "What happened last week?")
    assert result.intent == "recap"
    assert result.pieces[0].layer == "L3" and result.pieces[0].kind == "weekly_report"
    assert result.text.startswith("<memory-context ") and result.text.endswith("</memory-context>")
    assert "## Weekly reports (L3)" in result.text.split("\n")[1]
    assert any(p.layer == "L2" for p in result.pieces), "key L2 facts are always there"
    assert result.tokens == _tokens(result.text) <= 2000


def _message_id(engine: Engine, data: Any, source_message_id: str) -> int:
    """The L1 id of a fixture message (kept in message_keys after the message itself expired)."""
    with engine.connect() as conn:
        return int(
            conn.execute(
                text("select message_id from message_keys where namespace = :ns and source_message_id = :m"),
                {"ns": data.namespace, "m": source_message_id},
            ).scalar_one()
        )


def test_fact_question_gets_l2_items_first_and_chinese_finds_chinese(
    engine: Engine, settings: Settings, access_data: Any
) -> None:
    """The first piece is an L2 item resting on the message that answers the question (ZH_MESSAGES[1] says
    where u_zh works, ZH_MESSAGES[2] where they studied), whatever the extractor named or worded it."""
    result = _context(engine, settings, access_data, "u_zh", "我在哪家公司工作？")
    assert result.intent == "fact"
    assert result.pieces[0].layer == "L2"
    assert result.pieces[0].source_message_ids == [_message_id(engine, access_data, "u_zh-1")], [
        (p.label, p.text) for p in result.pieces[:5]
    ]
    education = _context(engine, settings, access_data, "u_zh", "我是哪个大学毕业的")
    assert education.intent == "fact" and education.pieces[0].layer == "L2"
    assert education.pieces[0].source_message_ids == [_message_id(engine, access_data, "u_zh-2")], [
        (p.label, p.text) for p in education.pieces[:5]
    ]
    assert all(p.layer != "L3" for p in result.pieces[:3])


def test_todays_perceptual_memory_and_provenance_are_included(
    engine: Engine, settings: Settings, access_data: Any
) -> None:
    result = _context(engine, settings, access_data, "u_zh", "帮我写一封感谢信")
    today = [p for p in result.pieces if p.section == "today"]
    assert any("公证处" in p.text for p in today)
    for piece in result.pieces:
        assert piece.ids and piece.layer and piece.event_at is not None
        assert f"id={piece.ids[0]}" in result.text


@pytest.mark.parametrize(
    ("budget", "fmt", "subject", "query"),
    [
        (40, "text", "u_en", "What happened last week?"),  # below one report line: nothing or a shortened one
        (90, "json", "u_zh", "我的工作和学历是什么？"),  # JSON pays for its own syntax
        (200, "text", "u_zh", "我的工作和学历是什么？"),  # a few items
        (600, "json", "u_en", "What happened last week?"),  # reports, shortened or whole
        (2000, "text", "u_en", "What happened last week?"),  # the default: everything fits, retrieval too
    ],
)
def test_context_never_exceeds_the_budget(
    engine: Engine, settings: Settings, access_data: Any, budget: int, fmt: str, subject: str, query: str
) -> None:
    result = _context(engine, settings, access_data, subject, query, budget_tokens=budget, fmt=fmt)
    assert _tokens(result.text) <= budget
    assert result.tokens == _tokens(result.text)
    if budget >= 200:
        assert result.pieces, "a budget of 200 tokens holds at least one piece"
    if fmt == "json" and result.pieces:  # nothing that fits gives an empty text
        payload = json.loads(result.text)["memory_context"]
        assert len(payload["pieces"]) == len(result.pieces)
        for piece in payload["pieces"]:
            assert {"layer", "ids", "score", "event_at", "text"} <= set(piece)


def test_a_large_budget_fits_more_and_a_tiny_one_is_refused(
    engine: Engine, settings: Settings, access_data: Any
) -> None:
    small = _context(engine, settings, access_data, "u_zh", "我的情况", budget_tokens=120)
    large = _context(engine, settings, access_data, "u_zh", "我的情况", budget_tokens=4000)
    assert len(large.pieces) > len(small.pieces)
    with pytest.raises(ValueError, match="below the"):
        _context(engine, settings, access_data, "u_zh", "我的情况", budget_tokens=5)


def test_unknown_subject_gets_an_empty_text(engine: Engine, settings: Settings, access_data: Any) -> None:
    result = _context(engine, settings, access_data, "nobody", "What happened last week?")
    assert result.pieces == [] and result.text == "" and result.tokens == 0  # seed 003: inject nothing


def test_context_cli_prints_the_block(settings: Settings, access_data: Any) -> None:
    from strataflow.cli import app

    scope = ["--namespace", access_data.namespace, "--subject", "u_en"]
    args = ["context", *scope, "--query", "what is my role?", "--budget", "300"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("<memory-context") and _tokens(result.stdout.strip()) <= 300
    as_json = CliRunner().invoke(app, [*args[:-2], "--budget", "300", "--format", "json"])
    assert json.loads(as_json.stdout)["memory_context"]["subject_id"] == "u_en"
