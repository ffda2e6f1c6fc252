"""Seed 000 memory manager: save_info runs the extraction stage on one exchange (same prompt, gateway and
ledger), summarize answers the four sections with completeness and a narrative in the subject's language, and
get_user_context answers load_context."""

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

EXCHANGE = ("我今年三十多岁，在上海做产品经理，年薪大概60万。", "好的，了解了，谢谢您的介绍。")
LEDGER = text("select count(*) from llm_calls where namespace = :ns and stage = 'extract'")


def _leaves(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, list):
        return [leaf for v in value for leaf in _leaves(v)]
    return [str(value)]


def test_save_info_extracts_now_and_the_same_exchange_saves_nothing_twice(
    engine: Engine, settings: Settings, namespace: str
) -> None:
    with engine.begin() as conn:
        first = save_exchange(conn, settings, namespace, "newcomer", *EXCHANGE)
    leaves = _leaves(first.extracted_info)
    assert "30+" in leaves and "35" not in leaves, "vague stays vague"
    assert first.extracted_info == {"age": "30+", "job_title": "产品经理", "location": "上海",
                                    "annual_income": 600000}  # fmt: skip
    assert first.saved_count == len(first.saved_memories) == 4 and first.skipped_fields == []
    assert [(m.memoryType, m.field, m.content, m.importance) for m in first.saved_memories] == [
        ("FACT", "age", "年龄：30+", 70),
        ("FACT", "job_title", "职位：产品经理", 70),
        ("FACT", "location", "所在地：上海", 70),
        ("FACT", "annual_income", "年收入：约60万", 70),
    ]
    with engine.begin() as conn:
        calls = conn.execute(LEDGER, {"ns": namespace}).scalar()
        second = save_exchange(conn, settings, namespace, "newcomer", *EXCHANGE)
        assert conn.execute(LEDGER, {"ns": namespace}).scalar() == calls, "the cache answered: no request"
        items = conn.execute(
            text("select key, source, prompt_version, metadata from memory_items where namespace = :ns"),
            {"ns": namespace},
        ).all()
        profile = conn.execute(
            text("select document ->> 'occupation' from profile_documents where namespace = :ns"
                 " and doc_type = 'work'"), {"ns": namespace},
        ).scalar()  # fmt: skip
    assert (second.saved_count, second.saved_memories, second.llm_calls) == (0, [], 0)
    assert sorted(second.skipped_fields) == ["age", "annual_income", "job_title", "location"]
    assert {row.key for row in items} == {"age", "job_title", "location", "annual_income"}
    assert {(row.source, row.prompt_version, row.metadata["via"]) for row in items} == {
        ("extracted", PROMPT_VERSION, "save_info")
    }
    assert profile == "产品经理", "both documents exist and follow the saved items"


def test_existing_info_with_the_same_value_is_skipped_and_a_new_value_wins(
    engine: Engine, settings: Settings, namespace: str
) -> None:
    with engine.begin() as conn:
        result = save_exchange(
            conn, settings, namespace, "n2", "我在上海做产品经理，今年三十多岁。", None,
            {"currentJobTitle": "产品经理", "currentLocation": "北京"},
        )  # fmt: skip
    assert result.skipped_fields == ["job_title"] and result.actions["job_title"] == "in_existing_info"
    assert "job_title" not in result.extracted_info
    assert {m.field for m in result.saved_memories} == {"age", "location"}, "上海 is newer than 北京"


def test_seed_000_field_names_map_to_vocabulary_keys() -> None:
    assert [normalize_key(name) for name in ("currentJobTitle", "annualIncome", "age", "maritalStatus")] == [
        "job_title",
        "annual_income",
        "age",
        "marital_status",
    ]


def test_summarize_gives_the_four_sections_completeness_and_a_narrative_in_the_subjects_language(
    engine: Engine, settings: Settings, namespace: str, load: Any
) -> None:
    load({"zh": ["我今年32岁，浙大计算机硕士毕业的。", "我已婚，有一个孩子。"],
          "en": ["I'm 41 and I work as a nurse in Leeds."]})  # fmt: skip
    with engine.connect() as conn:
        zh = summarize(conn, namespace, "zh")
        en = summarize(conn, namespace, "en")
        empty = summarize(conn, namespace, "nobody")
    assert set(zh.user_profile.model_dump()) == {"basic", "career", "immigration", "family"}
    assert zh.user_profile.basic["age"] == 32 and zh.user_profile.career["university"] == "浙江大学"
    assert zh.user_profile.family == {"marital_status": "已婚", "children": 1}
    vocabulary = [key for keys in PROFILE_SECTIONS.values() for key in keys]
    filled = zh.completeness.filled_fields
    assert sorted(filled + zh.completeness.missing_fields) == sorted(vocabulary)
    assert zh.completeness.score == round(100 * len(filled) / len(vocabulary))
    assert zh.language == "zh" and "年龄32" in zh.narrative_summary and "浙江大学" in zh.narrative_summary
    assert en.language == "en" and "nurse" in en.narrative_summary and "年龄" not in en.narrative_summary
    assert (empty.completeness.score, empty.completeness.filled_fields) == (0, [])


def test_get_user_context_answers_memories_a_summary_and_the_total(
    engine: Engine, settings: Settings, namespace: str, load: Any
) -> None:
    load(
        {
            "c": [
                "我今年32岁，浙大计算机硕士毕业的。",
                "我想申请高才通，希望明年办好。",
                "我比较喜欢用微信沟通。",
            ]
        }
    )
    with engine.connect() as conn:
        context = get_user_context(conn, settings, namespace, "c", "用户的学历", limit=3)
        nothing = get_user_context(conn, settings, namespace, "nobody", "anything")
    assert context.total_memories >= 5 and len(context.memories) == 3
    assert context.memories[0].field in ("education", "university"), "the query's fields first"
    types = {m.type for m in get_user_context_all(engine, settings, namespace)}
    assert {"FACT", "INTENT"} <= types
    assert context.user_profile_summary and "浙江大学" in context.user_profile_summary
    assert (nothing.memories, nothing.total_memories, nothing.user_profile_summary) == ([], 0, None)


def get_user_context_all(engine: Engine, settings: Settings, namespace: str) -> list[Any]:
    with engine.connect() as conn:
        return get_user_context(conn, settings, namespace, "c", "", limit=50).memories


def test_the_save_info_and_user_context_commands_print_the_seed_shapes(namespace: str) -> None:
    runner = CliRunner()
    saved = runner.invoke(
        app, ["save-info", "-n", namespace, "-s", "cli", "-u", "我今年二十几岁，在深圳工作。"]
    )
    assert saved.exit_code == 0, saved.output
    body = json.loads(saved.stdout)
    assert body["extracted_info"]["age"] == "20-29" and body["saved_count"] == len(body["saved_memories"])
    shown = runner.invoke(app, ["user-context", "-n", namespace, "-s", "cli", "-q", "年龄"])
    assert shown.exit_code == 0 and json.loads(shown.stdout)["memories"][0]["field"] == "age"
    bad = runner.invoke(app, ["save-info", "-n", namespace, "-s", "cli", "-u", "hi", "--existing", "[1]"])
    assert bad.exit_code == 1 and "--existing must be a JSON object" in bad.stderr
    for command in (["save-info"], ["user-context"], ["hot-memory", "refresh"]):
        helped = runner.invoke(app, [*command, "--help"])
        assert helped.exit_code == 0 and "Example:" in helped.stdout
