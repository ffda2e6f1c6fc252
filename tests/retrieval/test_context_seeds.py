"""Seed 001 getContextForPrompt (explicit intents, hot memory always, reports by similarity, nothing found ->
empty), seed 002 profile markers and status in the context, seed 003 agent scope."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, text

from strataflow.config import Settings
from strataflow.memory.profiles import set_profile_status
from strataflow.memory.store import upsert_item
from strataflow.pipeline.embed import embed_pending
from strataflow.pipeline.hot_memory import refresh_hot_memory
from strataflow.retrieval.context import build_context
from strataflow.retrieval.context_budget import count_tokens
from strataflow.retrieval.context_parts import resolve_intent
from tests.fixtures.scripted_model import ScriptedModel, fact, item

DIALOG = [
    "我是后端开发工程师，在杭州工作。",
    "我博士是同济毕业的，学的金融。",
    "我想申请IANG，希望尽快办下来。",
    "The login page is in progress, about 60% done.",
    "We decided to use Redis because it keeps the stack small.",
]
INSERT_REPORT = text(
    """
    insert into weekly_reports (namespace, subject_id, week_start, week_end, summary, input_hash)
    values (:ns, :subject, :week_start, :week_start + 6, :summary, md5(:summary))
    """
)


@pytest.fixture
def loaded(namespace: str, load: Any, scripted_model: ScriptedModel) -> str:
    """A subject with L2 items (a known extraction: the scripted model) and a hot summary; returns the
    namespace."""
    scripted_model.says(DIALOG[0], fact("job_title", "后端开发工程师"), fact("location", "杭州"))
    scripted_model.says(
        DIALOG[1], fact("education", "博士"), fact("university", "同济大学"), fact("major", "金融")
    )
    scripted_model.says(DIALOG[2], item("intent", "target_programs", ["IANG"]))
    scripted_model.says(
        DIALOG[3], item("status", "status_login_page", {"status": "in_progress", "progress": 60})
    )
    scripted_model.says(DIALOG[4], item("decision", "decision_cache", {"decision": "Redis"}))
    load({"c": DIALOG}, using=scripted_model.settings)
    hot = refresh_hot_memory(scripted_model.settings, namespace=namespace)
    assert hot.summaries_written == 1 and hot.errors == []
    return namespace


def _context(engine: Engine, settings: Settings, namespace: str, subject: str, query: str, **kw: Any) -> Any:
    with engine.connect() as conn:
        return build_context(conn, settings, namespace, subject, query, **kw)


@pytest.mark.parametrize(
    ("given", "used"),
    [
        ("QA_QUERY", "qa"),  # seed 001: hot + weekly reports + conversation retrieval
        ("QC_TASK", "task"),  # seed 001: hot + SOP status
        ("protocol_qa", "protocol"),  # seed 001: hot + knowledge base (RAG); case does not matter
        ("GENERAL", "other"),  # the seed's general case
        ("recap", "recap"),  # our own names are accepted too
        (None, "fact"),  # no intent: classified from the query
    ],
)
def test_explicit_intents_map_to_the_documented_sections(given: str | None, used: str) -> None:
    assert resolve_intent(given, "我在哪家公司工作？") == used


def test_an_unknown_intent_is_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="QA_QUERY"):
        resolve_intent("SMALL_TALK", "hi")


@pytest.mark.parametrize("intent", ["QA_QUERY", "QC_TASK", "PROTOCOL_QA", "GENERAL", None])
@pytest.mark.parametrize(("budget", "fmt"), [(2000, "json"), (140, "text")])
def test_hot_memory_is_always_injected_within_the_budget(
    engine: Engine, settings: Settings, loaded: str, intent: str | None, budget: int, fmt: str
) -> None:
    result = _context(
        engine, settings, loaded, "c", "他在哪里工作？", intent=intent, budget_tokens=budget, fmt=fmt
    )
    assert [p.kind for p in result.pieces].count("hot_summary") == 1, [p.kind for p in result.pieces]
    assert result.tokens == count_tokens(result.text) <= budget
    if fmt == "json":
        kinds = [piece["kind"] for piece in json.loads(result.text)["memory_context"]["pieces"]]
        assert "hot_summary" in kinds


def test_nothing_found_gives_an_empty_text_or_an_empty_json_block(
    engine: Engine, settings: Settings, namespace: str
) -> None:
    result = _context(engine, settings, namespace, "nobody_here", "anything at all", fmt="text")
    assert (result.text, result.tokens, result.pieces) == ("", 0, [])
    as_json = _context(engine, settings, namespace, "nobody_here", "anything at all", fmt="json")
    assert as_json.pieces == [] and json.loads(as_json.text)["memory_context"]["pieces"] == []


def test_profiles_go_between_the_seed_markers_and_a_disabled_one_is_left_out(
    engine: Engine, settings: Settings, loaded: str
) -> None:
    query = "这位客户的学历和工作是什么？"
    both = _context(engine, settings, loaded, "c", query, profile="both")
    assert both.text.index("<!-- USER_MEMORY_START -->") < both.text.index("<!-- USER_MEMORY_END -->")
    assert both.text.index("<!-- USER_MEMORY_END -->") < both.text.index("<!-- WORK_MEMORY_START -->")
    user_block = both.text.split("<!-- USER_MEMORY_START -->\n")[1].split("\n<!-- USER_MEMORY_END -->")[0]
    assert json.loads(user_block)["occupation"] == "后端开发工程师", "the document of the subject's L2 items"
    assert "WORK_MEMORY" not in _context(engine, settings, loaded, "c", query, profile="user").text
    assert "MEMORY_START" not in _context(engine, settings, loaded, "c", query).text  # profile=none
    with engine.begin() as conn:
        set_profile_status(conn, loaded, "c", "user", "disabled")
    after = _context(engine, settings, loaded, "c", query, profile="both", fmt="json")
    kinds = [piece["kind"] for piece in json.loads(after.text)["memory_context"]["pieces"]]
    assert "user_memory" not in kinds and "work_memory" in kinds


def test_an_agent_sees_unscoped_own_and_shared_items_never_anothers_private_ones(
    engine: Engine, settings: Settings, namespace: str
) -> None:
    at = datetime.now(UTC) - timedelta(hours=1)
    with engine.begin() as conn:
        for key, agent, words in (
            ("q3_plan", "agent_a", "Q3 focus is the Lisbon office launch"),
            ("handbook", "agent_a", "The Lisbon office launch handbook is in the wiki"),
            ("budget", None, "The Lisbon office launch budget is approved"),
        ):
            upsert_item(conn, namespace=namespace, subject_id="u9", kind="meta", key=key, value=words,
                        statement=words, event_at=at, agent_id=agent, source="manual")  # fmt: skip
        conn.execute(
            text("update memory_items set is_shared = true where namespace = :ns and key = 'handbook'"),
            {"ns": namespace},
        )

    def keys(agent: str | None) -> set[str]:
        result = _context(engine, settings, namespace, "u9", "Lisbon office launch", agent_id=agent)
        return {p.label for p in result.pieces if p.layer == "L2"}

    assert keys("agent_a") == {"q3_plan", "handbook", "budget"}
    assert keys("agent_b") == {"handbook", "budget"}
    assert keys(None) == {"handbook", "budget"}  # no agent: no agent's private items


def test_weekly_reports_are_chosen_by_similarity_with_recency_breaking_recap_ties(
    engine: Engine, settings: Settings, namespace: str
) -> None:
    monday = date.today() - timedelta(days=date.today().weekday() + 7)
    reports = [
        (monday - timedelta(weeks=3), "We migrated the billing database from MySQL to PostgreSQL."),
        (monday - timedelta(weeks=2), "Weekly recap: routine work, nothing special happened."),
        (monday - timedelta(weeks=1), "Weekly recap: routine work, nothing special happened."),
        (monday, "The team planned the summer offsite and booked a venue in Porto."),
    ]
    with engine.begin() as conn:
        for week_start, summary in reports:
            conn.execute(INSERT_REPORT, {"ns": namespace, "subject": "w", "week_start": week_start,
                                         "summary": summary})  # fmt: skip
    assert embed_pending(settings, progress=False, namespace=namespace).weekly_reports == 4

    qa = _context(engine, settings, namespace, "w", "which database did billing move to?", intent="QA_QUERY")
    weeks = [p.label for p in qa.pieces if p.layer == "L3"]
    assert weeks[0] == str(reports[0][0]), "the most similar report, not the newest"
    assert len(weeks) == 2

    recap = _context(engine, settings, namespace, "w", "Weekly recap: routine work", intent="recap")
    weeks = [p.label for p in recap.pieces if p.layer == "L3"]
    assert weeks[:2] == [str(reports[2][0]), str(reports[1][0])], "equal similarity: the newest first"
