"""The seed 000 example through ingest + extraction with the default offline/rules model, and the CLI: every
item rests on the message that said it, the summary and the documents are what L2 holds, and a rerun sends
nothing. What the rules extract from the example is tested in tests/llm/offline (test_offline_provider.py
and test_stage_prompts.py)."""

from __future__ import annotations

import json

from sqlalchemy import text
from typer.testing import CliRunner

from models.vocabulary import PROFILE_KEYS, PROFILE_SECTIONS
from strataflow.cli import app
from strataflow.memory.profiles import get_profiles
from strataflow.memory.user_memory import summarize
from strataflow.pipeline.extract import PROMPT_VERSION, extract_new
from strataflow.pipeline.ingest import ingest_logs

SEED_000 = "我今年32岁，浙大计算机硕士毕业的，现在在杭州做前端开发，工作8年了，年薪大概80万"
VAGUE = "我30多岁，在深圳做销售"
SELECT_ITEMS = text(
    """
    select subject_id, key, value, source_message_ids, prompt_version, model, run_id from memory_items
    where namespace = :ns and kind <> 'hot_summary'
    """
)
SELECT_MESSAGE_IDS = text(
    "select source_message_id, message_id from conversation_messages where namespace = :ns"
)
COUNT_CALLS = text("select count(*) from llm_calls where namespace = :ns")


def test_seed_000_example_is_extracted_with_lineage_and_a_rerun_sends_nothing(
    settings, engine, namespace, write_logs, message
):
    logs = write_logs(
        "seed",
        [
            message("client-a", "a1", SEED_000, "2026-11-02T09:00:00+08:00", conv="k1"),
            message("client-b", "b1", VAGUE, "2026-11-02T09:00:00+08:00", conv="k2"),
        ],
    )
    ingest_logs(settings, [logs], namespace=namespace, progress=False)
    result = extract_new(settings, namespace=namespace, progress=False)
    assert (result.scopes, result.llm_calls, result.budget_stopped, result.errors) == (2, 2, False, [])
    with engine.connect() as conn:
        ids = dict(conn.execute(SELECT_MESSAGE_IDS, {"ns": namespace}).all())
        rows = conn.execute(SELECT_ITEMS, {"ns": namespace}).all()
        said = {s: {r.key: r.value for r in rows if r.subject_id == s} for s in ("client-a", "client-b")}
        summary = summarize(conn, namespace, "client-a")
        documents = get_profiles(conn, namespace, "client-a")
        before = conn.execute(COUNT_CALLS, {"ns": namespace}).scalar()
    assert said["client-a"] and said["client-b"], "each subject's message gives items"
    lineage = {(r.subject_id, tuple(r.source_message_ids)) for r in rows}
    assert lineage == {("client-a", (ids["a1"],)), ("client-b", (ids["b1"],))}, "an item rests on its message"
    assert {(r.prompt_version, r.model) for r in rows} == {(PROMPT_VERSION, settings.extract_model)}
    assert len({r.run_id for r in rows}) == 1, "one run wrote them"
    assert set(said["client-a"]) <= PROFILE_KEYS, "profile facts use the documented vocabulary"

    # the summary and the documents are what L2 holds
    sections = summary.user_profile.model_dump()
    assert {key: value for section in sections.values() for key, value in section.items()} == said["client-a"]
    assert all(key in PROFILE_SECTIONS[name] for name, section in sections.items() for key in section)
    assert sorted(summary.completeness.filled_fields) == sorted(said["client-a"])
    assert summary.completeness.score > 0 and summary.language == "zh"
    occupation = said["client-a"].get("job_title")
    assert documents["work_memory"]["occupation"] == occupation == documents["user_memory"]["occupation"]

    rerun = CliRunner().invoke(app, ["extract", "--namespace", namespace])
    assert rerun.exit_code == 0, rerun.output
    assert "llm calls 0" in rerun.output
    with engine.connect() as conn:
        assert conn.execute(COUNT_CALLS, {"ns": namespace}).scalar() == before == 2

    shown = CliRunner().invoke(
        app, ["profile", "summarize", "--namespace", namespace, "--subject", "client-a"]
    )
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout) == summary.model_dump(mode="json")
