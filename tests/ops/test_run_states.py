"""The states of a pipeline run are one list (models/params.py RUN_STATES): the check constraint on
pipeline_runs.status, dbt's accepted values and pipeline_health's count columns all follow it."""

from __future__ import annotations

import re

import yaml
from sqlalchemy import Engine, text

from models.params import RUN_STATES
from strataflow.ops.dbt_sources import ANALYTICS_DIR

SELECT_CHECKS = text(
    """
    select pg_get_constraintdef(c.oid) from pg_constraint as c
    where c.contype = 'c' and c.conrelid = cast(:table as regclass)
        and pg_get_constraintdef(c.oid) like '%status%'
    """
)


def _states(definition: str) -> set[str]:
    return set(re.findall(r"'([a-z_]+)'::text", definition))


def test_the_status_constraints_allow_exactly_the_run_states(engine: Engine) -> None:
    with engine.connect() as conn:
        for table in ("pipeline_runs", "pipeline_run_namespaces"):
            (definition,) = conn.execute(SELECT_CHECKS, {"table": table}).scalars().all()
            assert _states(definition) == set(RUN_STATES), table


def test_dbt_accepts_the_run_states() -> None:
    project = yaml.safe_load((ANALYTICS_DIR / "dbt_project.yml").read_text(encoding="utf-8"))
    assert tuple(project["vars"]["run_states"]) == RUN_STATES
    staging = (ANALYTICS_DIR / "models" / "staging" / "_staging.yml").read_text(encoding="utf-8")
    assert "var('run_states')" in staging


def test_pipeline_health_counts_every_final_state(engine: Engine) -> None:
    with engine.connect() as conn:
        query = "select column_name from information_schema.columns where table_name = 'pipeline_health'"
        columns = set(conn.execute(text(query)).scalars())
    assert {f"count_{state}" for state in RUN_STATES} <= columns
