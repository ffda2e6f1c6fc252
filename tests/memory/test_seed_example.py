"""The seed 000 example through ingest + extraction with the default offline/rules model, and the CLI."""

from __future__ import annotations

from sqlalchemy import text
from typer.testing import CliRunner

from strataflow.cli import app
from strataflow.memory.profiles import get_profile
from strataflow.memory.user_memory import summarize
from strataflow.pipeline.extract import extract_new
from strataflow.pipeline.ingest import ingest_logs

SEED_000 = "我今年32岁，浙大计算机硕士毕业的，现在在杭州做前端开发，工作8年了，年薪大概80万"
EXPECTED_A = {
    "age": 32,
    "education": "硕士",
    "university": "浙江大学",
    "major": "计算机",
    "job_title": "前端开发",
    "years_of_experience": 8,
    "annual_income": 800000,
    "location": "杭州",
}


def test_seed_000_example_is_extracted_in_full_and_vague_stays_vague(
    settings, engine, namespace, write_logs, message
):
    logs = write_logs(
        "seed",
        [
            message("client-a", "a1", SEED_000, "2026-11-02T09:00:00+08:00", conv="k1"),
            message("client-b", "b1", "我30多岁，在深圳做产品经理", "2026-11-02T09:00:00+08:00", conv="k2"),
        ],
    )
    ingest_logs(settings, [logs], namespace=namespace, progress=False)
    result = extract_new(settings, namespace=namespace, progress=False)
    assert (result.scopes, result.llm_calls, result.budget_stopped, result.errors) == (2, 2, False, [])
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "select subject_id, key, value from memory_items"
                " where namespace = :ns and kind <> 'hot_summary'"
            ),
            {"ns": namespace},
        ).all()
        a = {key: value for subject, key, value in rows if subject == "client-a"}
        b = {key: value for subject, key, value in rows if subject == "client-b"}
        assert {key: a.get(key) for key in EXPECTED_A} == EXPECTED_A
        assert b["age"] == "30+"
        summary = summarize(conn, namespace, "client-a")
        assert summary.user_profile.career["university"] == "浙江大学" and summary.completeness.score > 0
        assert summary.user_profile.career["annual_income"] == 800000
        document = get_profile(conn, namespace, "client-a", "work")
        assert document.content["occupation"] == "前端开发"
        calls = conn.execute(text("select count(*) from llm_calls where namespace = :ns"), {"ns": namespace})
        before = calls.scalar()

    rerun = CliRunner().invoke(app, ["extract", "--namespace", namespace])
    assert rerun.exit_code == 0, rerun.output
    assert "llm calls 0" in rerun.output
    with engine.connect() as conn:
        after = conn.execute(
            text("select count(*) from llm_calls where namespace = :ns"), {"ns": namespace}
        ).scalar()
    assert after == before == 2

    shown = CliRunner().invoke(
        app, ["profile", "summarize", "--namespace", namespace, "--subject", "client-a"]
    )
    assert shown.exit_code == 0 and "浙江大学" in shown.output
