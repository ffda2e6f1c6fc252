"""The generated pages of docs/ match their sources, and the README links every page."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import AliasChoices
from sqlalchemy import Engine, text
from typer.testing import CliRunner

from strataflow.cli import app
from strataflow.config import Settings
from strataflow.ops import docs

ROOT = Path(__file__).resolve().parents[2]


def test_the_checked_in_analyst_guide_is_the_one_the_sql_comments_generate() -> None:
    checked_in = (ROOT / "docs" / "analyst-guide.md").read_text(encoding="utf-8")
    assert checked_in == docs.analyst_guide(), "run: strataflow docs analyst-guide"


def test_the_checked_in_configuration_page_is_the_one_settings_generate() -> None:
    checked_in = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert checked_in == docs.configuration_table(), "run: strataflow docs configuration"


def test_the_analyst_guide_has_every_commented_column_with_the_latest_comment(tmp_path: Path) -> None:
    (tmp_path / "001_create_view_things.sql").write_text(
        "-- grain: one row per thing\ncreate view things as select 1 as thing_id, 'x' as label;\n"
        "comment on view things is 'Things.';\n"
        "comment on column things.thing_id is 'The id.';\n"
        "comment on column things.label is 'It''s a label | with a bar.';\n"
    )
    (tmp_path / "002_replace_view_things.sql").write_text(
        "create or replace view things as select 1 as thing_id, 'x' as label, 2 as count_parts;\n"
        "comment on column things.label is 'The label.';\n"
        "comment on column things.count_parts is 'Parts of the thing.';\n"
    )

    guide = docs.analyst_guide(tmp_path)

    section = guide[guide.index("### `things`") :]
    assert "*File:* `sql/002_replace_view_things.sql`" in section and "*Grain:* one row per thing" in section
    rows = re.findall(r"^\| `(\w+)` \| (.*) \|$", section, re.M)
    assert rows == [("thing_id", "The id."), ("label", "The label."), ("count_parts", "Parts of the thing.")]


def test_a_view_file_is_the_whole_definition_in_the_guide(tmp_path: Path) -> None:
    (tmp_path / "001_create_view_things.sql").write_text(
        "-- grain: one row per old thing\ncreate view things as select 1 as thing_id, 'x' as label;\n"
        "comment on view things is 'Old things.';\n"
        "comment on column things.label is 'Old label.';\n"
    )
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "things.sql").write_text(
        "-- grain: one row per thing\n"
        "create or replace view things with (security_invoker = true) as\n"
        "select 1 as thing_id, 2 as count_parts;\n"
        "comment on view things is 'Things.';\n"
        "comment on column things.thing_id is 'The id.';\n"
        "comment on column things.count_parts is 'Parts of the thing.';\n"
    )

    guide = docs.analyst_guide(tmp_path)

    section = guide[guide.index("### `things`") :]
    assert "*File:* `sql/views/things.sql`" in section and "*Grain:* one row per thing" in section
    assert "Things." in section and "Old" not in section
    rows = re.findall(r"^\| `(\w+)` \| (.*) \|$", section, re.M)
    assert rows == [("thing_id", "The id."), ("count_parts", "Parts of the thing.")]


def test_the_guide_lists_every_view_and_table_with_the_columns_the_database_has(engine: Engine) -> None:
    with engine.connect() as conn:
        catalog = {
            row.relname: list(row.columns)
            for row in conn.execute(
                text(
                    """
                    select c.relname,
                           array(select a.attname::text from pg_attribute as a
                                 where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
                                 order by a.attnum) as columns
                    from pg_class as c
                    where c.relnamespace = 'public'::regnamespace and c.relkind in ('v', 'r', 'p')
                      and not c.relispartition
                    """
                )
            )
        }
    documented = {obj.name: list(obj.columns) for obj in docs.sql_objects() if obj.kind in ("view", "table")}
    assert documented == catalog


def test_the_configuration_page_names_every_setting_by_its_environment_variable() -> None:
    page = docs.configuration_table()
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        if isinstance(alias, AliasChoices):  # a standard variable of its own (OTEL_EXPORTER_OTLP_...)
            assert f"| `{alias.choices[0]}`" in page
        elif name != "database_url":
            assert f"| `STRATAFLOW_{name.upper()}` |" in page
    assert "| `DATABASE_URL` or `STRATAFLOW_DATABASE_URL` | unset |" in page
    assert "| `STRATAFLOW_RETENTION_DAYS` | `30` | ≥ 1, ≤ 3650 |" in page


def test_docs_check_exits_1_on_a_stale_page_and_0_on_a_fresh_one(tmp_path: Path) -> None:
    runner = CliRunner()
    (tmp_path / "configuration.md").write_text("old\n")
    stale = runner.invoke(app, ["docs", "configuration", "--docs-dir", str(tmp_path), "--check"])
    written = runner.invoke(app, ["docs", "configuration", "--docs-dir", str(tmp_path)])
    fresh = runner.invoke(app, ["docs", "configuration", "--docs-dir", str(tmp_path), "--check"])

    assert (stale.exit_code, written.exit_code, fresh.exit_code) == (1, 0, 0), stale.output + fresh.output
    assert "out of date" in stale.output


def test_the_readme_is_short_and_links_every_docs_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"docs/{page.name}" in readme, page.name
