"""Seed 000 memory manager: save_info runs the extraction stage on one exchange (same prompt, gateway and
ledger), summarize answers the four sections with completeness and a narrative in the subject's language, and
get_user_context answers load_context.

The model is the scripted one (tests/fixtures/scripted_model.py): each test fixes what is extracted, so these
tests check what save_info, summarize and get_user_context do with it. What the offline rules extract from
these phrasings is tested in tests/llm/offline/test_stage_prompts.py."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Engine, text
from typer.testing import CliRunner

from models.vocabulary import PROFILE_SECTIONS, normalize_key
from strataflow.cli import app
from strataflow.config import Settings
from strataflow.memory.user_memory import summarize
from strataflow.pipeline.extract import PROMPT_VERSION
from strataflow.pipeline.save_info import save_exchange
from strataflow.retrieval.user_context import get_user_context
from tests.fixtures.scripted_model import ScriptedModel, fact, item

USER_TURN = "我今年四十出头，在成都做律师，年薪大概50万。"
ASSISTANT_TURN = "好的，您是在律所工作吗？"
SAID = [  # what the scripted model answers for the user's turn
    fact("age", "40+"),
    fact("job_title", "律师"),
    fact("location", "成都"),
    fact("annual_income", 500000, approximate=True),
]
LEDGER = text("select count(*) from llm_calls where namespace = :ns and stage = 'extract'")


def test_save_info_saves_what_the_model_extracts_and_the_same_exchange_saves_nothing_twice(
    engine: Engine, namespace: str, scripted_model: ScriptedModel
) -> None:
    scripted_model.says(USER_TURN, *SAID)
    scripted_model.says(ASSISTANT_TURN, fact("company", "律所"))  # cites the assistant's turn: never saved
    settings = scripted_model.settings
    with engine.begin() as conn:
        first = save_exchange(conn, settings, namespace, "newcomer", USER_TURN, ASSISTANT_TURN)
    assert scripted_model.tasks() == ["extract"] and first.llm_calls == 1
    assert first.extracted_info == {"age": "40+", "job_title": "律师", "location": "成都",
                                    "annual_income": 500000}  # fmt: skip
    assert first.saved_count == len(first.saved_memories) == 4 and first.skipped_fields == []
    assert [(m.memoryType, m.field, m.content, m.importance) for m in first.saved_memories] == [
        ("FACT", "age", "年龄：40+", 70),
        ("FACT", "job_title", "职位：律师", 70),
        ("FACT", "location", "所在地：成都", 70),
        ("FACT", "annual_income", "年收入：约50万", 70),
    ], "seed 000's content: a Chinese label, 万 for money, 约 for an approximate value"
    with engine.begin() as conn:
        calls = conn.execute(LEDGER, {"ns": namespace}).scalar()
        second = save_exchange(conn, settings, namespace, "newcomer", USER_TURN, ASSISTANT_TURN)
        assert conn.execute(LEDGER, {"ns": namespace}).scalar() == calls == 1, "the cache answered"
        items = conn.execute(
            text("select key, source, prompt_version, model, source_message_ids, metadata from memory_items"
                 " where namespace = :ns"), {"ns": namespace},
        ).all()  # fmt: skip
        profile = conn.execute(
            text("select document ->> 'occupation' from profile_documents where namespace = :ns"
                 " and doc_type = 'work'"), {"ns": namespace},
        ).scalar()  # fmt: skip
    assert len(scripted_model.server.requests) == 1, "no second request"
    assert (second.saved_count, second.saved_memories, second.llm_calls) == (0, [], 0)
    assert sorted(second.skipped_fields) == ["age", "annual_income", "job_title", "location"]
    assert {row.key for row in items} == {"age", "job_title", "location", "annual_income"}
    assert {(row.source, row.prompt_version, row.model, row.metadata["via"]) for row in items} == {
        ("extracted", PROMPT_VERSION, "openai/scripted", "save_info")
    }
    assert all(row.source_message_ids == [] for row in items), "the exchange is not in L1: no L1 lineage"
    assert [row.metadata.get("approximate", False) for row in items if row.key == "annual_income"] == [True]
    assert profile == "律师", "both documents exist and follow the saved items"


def test_existing_info_with_the_same_value_is_skipped_and_a_new_value_wins(
    engine: Engine, namespace: str, scripted_model: ScriptedModel
) -> None:
    said = "我在成都做律师，今年四十出头。"
    scripted_model.says(said, fact("job_title", "律师"), fact("location", "成都"), fact("age", "40+"))
    with engine.begin() as conn:
        result = save_exchange(
            conn, scripted_model.settings, namespace, "n2", said, None,
            {"currentJobTitle": "律师", "currentLocation": "重庆"},
        )  # fmt: skip
    assert result.skipped_fields == ["job_title"] and result.actions["job_title"] == "in_existing_info"
    assert "job_title" not in result.extracted_info
    assert {m.field for m in result.saved_memories} == {"age", "location"}, "成都 is newer than 重庆"


def test_seed_000_field_names_map_to_vocabulary_keys() -> None:
    assert [normalize_key(name) for name in ("currentJobTitle", "annualIncome", "age", "maritalStatus")] == [
        "job_title",
        "annual_income",
        "age",
        "marital_status",
    ]


PROFILE_TURN = "我今年32岁，复旦数学硕士毕业的。"
PROFILE_SAID = [
    fact("age", 32),
    fact("education", "硕士"),
    fact("university", "复旦大学"),
    fact("major", "数学"),
]


def test_summarize_gives_the_four_sections_completeness_and_a_narrative_in_the_subjects_language(
    engine: Engine, namespace: str, load: Any, scripted_model: ScriptedModel
) -> None:
    scripted_model.says(PROFILE_TURN, *PROFILE_SAID)
    scripted_model.says("我已婚，有一个孩子。", fact("marital_status", "已婚"), fact("children", 1))
    scripted_model.says(
        "I work as a nurse", fact("age", 41), fact("job_title", "nurse"), fact("location", "Leeds")
    )
    load({"zh": [PROFILE_TURN, "我已婚，有一个孩子。"], "en": ["I'm 41 and I work as a nurse in Leeds."]},
         using=scripted_model.settings)  # fmt: skip
    with engine.connect() as conn:
        zh = summarize(conn, namespace, "zh")
        en = summarize(conn, namespace, "en")
        empty = summarize(conn, namespace, "nobody")
    assert set(zh.user_profile.model_dump()) == {"basic", "career", "immigration", "family"}
    assert zh.user_profile.basic == {"age": 32}
    assert zh.user_profile.career == {"education": "硕士", "university": "复旦大学", "major": "数学"}
    assert zh.user_profile.family == {"marital_status": "已婚", "children": 1}
    assert zh.user_profile.immigration == {}
    vocabulary = [key for keys in PROFILE_SECTIONS.values() for key in keys]
    filled = zh.completeness.filled_fields
    assert sorted(filled) == sorted(["age", "education", "university", "major", "marital_status", "children"])
    assert sorted(filled + zh.completeness.missing_fields) == sorted(vocabulary)
    assert zh.completeness.score == round(100 * len(filled) / len(vocabulary))
    assert (
        zh.language == "zh"
        and "年龄32" in zh.narrative_summary
        and "毕业院校复旦大学" in zh.narrative_summary
    )
    assert (
        en.language == "en"
        and "job title nurse" in en.narrative_summary
        and "年龄" not in en.narrative_summary
    )
    assert (empty.completeness.score, empty.completeness.filled_fields) == (0, [])


def test_get_user_context_answers_memories_a_summary_and_the_total(
    engine: Engine, settings: Settings, namespace: str, load: Any, scripted_model: ScriptedModel
) -> None:
    scripted_model.says(PROFILE_TURN, *PROFILE_SAID)
    scripted_model.says(
        "高才通", item("intent", "target_programs", ["TTPS"]), item("intent", "timeline", "明年")
    )
    scripted_model.says("微信", item("preference", "preference_communication", "微信"))
    load({"c": [PROFILE_TURN, "我想申请高才通，希望明年办好。", "我比较喜欢用微信沟通。"]},
         using=scripted_model.settings)  # fmt: skip
    with engine.connect() as conn:
        context = get_user_context(conn, settings, namespace, "c", "用户的学历", limit=3)
        every = get_user_context(conn, settings, namespace, "c", "", limit=50)
        nothing = get_user_context(conn, settings, namespace, "nobody", "anything")
    assert context.total_memories == len(every.memories) == 7 and len(context.memories) == 3
    assert context.memories[0].field in ("education", "university"), "the query's fields first"
    assert sorted((m.type, m.field) for m in every.memories) == [
        ("FACT", "age"), ("FACT", "education"), ("FACT", "major"), ("FACT", "university"),
        ("INTENT", "target_programs"), ("INTENT", "timeline"), ("PREFERENCE", "preference_communication"),
    ]  # fmt: skip
    assert [m.category for m in every.memories if m.field == "target_programs"] == ["TTPS"]
    assert context.user_profile_summary == summarize_now(engine, namespace, "c")
    assert "复旦大学" in context.user_profile_summary
    assert (nothing.memories, nothing.total_memories, nothing.user_profile_summary) == ([], 0, None)


def summarize_now(engine: Engine, namespace: str, subject: str) -> str:
    with engine.connect() as conn:
        return summarize(conn, namespace, subject).narrative_summary


def test_the_save_info_and_user_context_commands_print_the_seed_shapes(
    namespace: str, scripted_model: ScriptedModel
) -> None:
    said = "我今年二十几岁，在深圳工作。"
    scripted_model.says(said, fact("age", "20-29"), fact("location", "深圳"))
    runner = CliRunner(env=scripted_model.env)
    saved = runner.invoke(app, ["save-info", "-n", namespace, "-s", "cli", "-u", said])
    assert saved.exit_code == 0, saved.output
    body = json.loads(saved.stdout)
    assert body["extracted_info"] == {"age": "20-29", "location": "深圳"}
    assert body["saved_count"] == len(body["saved_memories"]) == 2 and body["skipped_fields"] == []
    assert scripted_model.tasks() == ["extract"], "the command used the configured model"
    shown = runner.invoke(app, ["user-context", "-n", namespace, "-s", "cli", "-q", "年龄"])
    assert shown.exit_code == 0 and json.loads(shown.stdout)["memories"][0]["field"] == "age"
    bad = runner.invoke(app, ["save-info", "-n", namespace, "-s", "cli", "-u", "hi", "--existing", "[1]"])
    assert bad.exit_code == 1 and "--existing must be a JSON object" in bad.stderr
    for command in (["save-info"], ["user-context"], ["hot-memory", "refresh"]):
        helped = runner.invoke(app, [*command, "--help"])
        assert helped.exit_code == 0 and "Example:" in helped.stdout
