"""docs/analytics.md's recipes for a team's own models, built as written with the installed dbt: the worked
example of a dbt project of the team's own, outside the checkout, that installs strataflow's as a package
(`strataflow analytics build --project-dir DIR`), and a model in a folder of the checkout's analytics/
(here a copy of it). Both tables get row-level security from strataflow's secure_mart macro. Between two
builds of the team's project, spend recorded late for old event days (a weekly's rollup retried 13 days
after its week) reaches the incremental mart_llm_cost and the team's model without --full-refresh."""

from __future__ import annotations

import re
import shutil
import uuid
from pathlib import Path

from sqlalchemy import Engine, text
from typer.testing import CliRunner

from strataflow.ops.dbt_sources import ANALYTICS_DIR

DOC = Path(__file__).resolve().parents[2] / "docs" / "analytics.md"
# A code block whose first line is a comment naming its file: "# packages.yml", "-- models/x.sql".
NAMED_BLOCK = re.compile(r"```(?:sql|yaml|yml)\n(?:#|--)\s*(\S+\.(?:sql|ya?ml))\b[^\n]*\n(.*?)```", re.S)
SECURED = text(
    """
    select c.relrowsecurity from pg_class as c
    where c.relname = :name and c.relnamespace = 'analytics'::regnamespace
    """
)
INSERT_CALL = text(
    """
    insert into llm_calls (run_id, stage, namespace, subject_id, model, prompt_version, input_hash,
                           prompt_tokens, completion_tokens, cost_usd, outcome, event_at)
    values (null, :stage, :ns, 'u1', 'openai/gpt-team', 'v1', md5(random()::text), 100, 20, :cost, 'ok',
            now() - make_interval(days => :days_ago))
    """
)


def doc_files() -> dict[str, str]:
    """The docs' named code blocks, file name -> text as written (the first line, the name, included)."""
    text_ = DOC.read_text(encoding="utf-8")
    return {
        name: block.group(0).split("\n", 1)[1].removesuffix("```")
        for block in re.finditer(r"```(?:sql|yaml|yml)\n.*?```", text_, re.S)
        if (found := NAMED_BLOCK.match(block.group(0))) is not None
        for name in [found.group(1)]
    }


def _build(*args: str) -> str:
    from strataflow.cli import app

    done = CliRunner().invoke(app, ["analytics", "build", "--quiet", *args])
    assert done.exit_code == 0, done.output
    return str(done.output)


def _spend(engine: Engine, namespace: str) -> tuple[object, ...]:
    with engine.connect() as conn:
        return tuple(
            conn.execute(
                text(
                    "select (select sum(calls) from analytics.mart_llm_cost where namespace = :ns),"
                    " (select sum(count_calls) from llm_cost_events where namespace = :ns),"
                    " (select calls from analytics.acme_llm_spend where namespace = :ns)"
                ),
                {"ns": namespace},
            ).one()
        )


def test_a_team_project_outside_the_checkout_builds_on_strataflows_package(
    engine: Engine, tmp_path: Path
) -> None:
    files = doc_files()
    team = tmp_path / "acme-dbt"
    for name in ("dbt_project.yml", "packages.yml", "models/acme_llm_spend.sql"):
        (team / name).parent.mkdir(parents=True, exist_ok=True)
        (team / name).write_text(files[name], encoding="utf-8")
    namespace = f"t_team_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        conn.execute(INSERT_CALL, {"stage": "extract", "ns": namespace, "cost": 0.5, "days_ago": 0})

    output = _build("--project-dir", str(team), "--select", "+acme_llm_spend")
    assert "acme_llm_spend" in output and (team / "dbt_packages" / "strataflow").exists()
    assert _spend(engine, namespace) == (1, 1, 1)
    with engine.connect() as conn:
        assert conn.execute(SECURED, {"name": "acme_llm_spend"}).scalar_one() is True
    assert not list(ANALYTICS_DIR.rglob("acme_llm_spend*")), "nothing of the team's is in the checkout"

    with engine.begin() as conn:  # recorded now, for work 2 and 13 days ago: after the last build
        conn.execute(INSERT_CALL, {"stage": "extract", "ns": namespace, "cost": 0.125, "days_ago": 2})
        conn.execute(INSERT_CALL, {"stage": "rollup", "ns": namespace, "cost": 0.25, "days_ago": 13})
    _build("--project-dir", str(team), "--select", "+acme_llm_spend")
    assert _spend(engine, namespace) == (3, 3, 3)


def test_the_docs_model_in_a_folder_of_the_checkout_builds_with_row_level_security(
    engine: Engine, tmp_path: Path
) -> None:
    copy = tmp_path / "analytics"
    shutil.copytree(ANALYTICS_DIR, copy, ignore=shutil.ignore_patterns("target", "logs", "dbt_packages"))
    written = []
    for name, body in doc_files().items():
        if name.startswith("analytics/models/teams/"):
            path = copy / name.removeprefix("analytics/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body, encoding="utf-8")
            written.append(path.stem)
    assert "acme_weekly_spend" in written
    _build("--project-dir", str(copy), "--select", "+acme_weekly_spend")
    with engine.connect() as conn:
        assert conn.execute(SECURED, {"name": "acme_weekly_spend"}).scalar_one() is True
