"""The dbt project's generated files: one source of truth (the SQL comments), checked for drift."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import yaml

from strataflow.db.migrations import SQL_DIR
from strataflow.ops import dbt_sources
from strataflow.ops.docs import sql_objects


def test_the_checked_in_sources_and_seed_are_what_the_sql_comments_generate() -> None:
    assert dbt_sources.stale_files() == [], "run `strataflow analytics sources` and commit the result"


def test_a_changed_column_comment_makes_the_sources_drift(tmp_path: Path) -> None:
    sql = tmp_path / "sql"
    shutil.copytree(SQL_DIR, sql)
    # In the order `db upgrade` applies them (numbered files, then sql/views/): the last one wins.
    files = sorted(sql.glob("*.sql")) + sorted((sql / "views").glob("*.sql"))
    view_file = [path for path in files if "comment on column memories." in path.read_text()][-1]
    text = view_file.read_text()
    changed = re.sub(r"(comment on column memories\.statement is ')[^']*'", r"\1Said otherwise.'", text)
    assert changed != text
    view_file.write_text(changed)

    checked_in = (dbt_sources.ANALYTICS_DIR / dbt_sources.SOURCES_FILE).read_text(encoding="utf-8")
    regenerated = dbt_sources.sources_yaml(sql)
    assert regenerated != checked_in
    assert "Said otherwise." in regenerated and "Said otherwise." not in checked_in


def test_every_analyst_view_is_a_source_with_its_column_comments_and_freshness_where_it_has_one() -> None:
    document = yaml.safe_load((dbt_sources.ANALYTICS_DIR / dbt_sources.SOURCES_FILE).read_text())
    tables = {table["name"]: table for table in document["sources"][0]["tables"]}
    views = [obj for obj in sql_objects() if obj.kind == "view"]
    assert views and {view.name for view in views} <= set(tables)
    for view in views:
        columns = {column["name"]: column["description"] for column in tables[view.name]["columns"]}
        assert columns == view.columns, view.name
    # freshness follows the schedules, on the runs: data that changes only with new messages has none
    nightly = tables["pipeline_runs"]["config"]
    assert nightly["loaded_at_field"] == "started_at"
    assert nightly["freshness"]["warn_after"] == {"count": 26, "period": "hour"}
    assert nightly["freshness"]["error_after"] == {"count": 50, "period": "hour"}
    assert "config" not in tables["memories"]
    weekly = tables["weekly_runs"]
    assert (
        weekly["identifier"] == "pipeline_runs"
        and weekly["config"]["freshness"]["filter"] == "flow = 'weekly'"
    )
    assert weekly["config"]["freshness"]["error_after"] == {"count": 15, "period": "day"}
