"""The dbt project against the test database: the weekly flow runs `dbt build` (real dbt, the real role),
the marts land in schema analytics owned by a role that reads under row-level security and writes only
there, analysts read the marts of their namespaces only (and a BI tool's sync of schema analytics lists
nothing they cannot read: staging views and seeds are in analytics_staging), and `strataflow analytics docs`
writes the site."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, create_engine, inspect, text
from sqlalchemy.exc import DBAPIError
from typer.testing import CliRunner

from models.params import WeeklyParams
from strataflow.config import Settings
from strataflow.db import roles
from strataflow.db.engine import libpq_url

MARTS = ("mart_memory_growth", "mart_llm_cost", "mart_profile_completeness", "mart_expiry_audit")
OWNER = text(
    """
    select r.rolname, r.rolsuper, r.rolbypassrls,
        has_schema_privilege(r.oid, 'public', 'CREATE') as pub_create,
        (select count(*) from pg_class as t where t.relnamespace = 'public'::regnamespace
            and t.relkind in ('r', 'p')
            and has_table_privilege(r.oid, t.oid, 'INSERT,UPDATE,DELETE,TRUNCATE')) as writable
    from pg_class as c join pg_roles as r on r.oid = c.relowner
    where c.oid = to_regclass(:relation)
    """
)


def _analyst(engine: Engine, settings: Settings, namespace: str) -> str:
    """A new analyst login role granted one namespace; its libpq URL."""
    name = f"bi_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        password = roles.create_role(conn, name, "analyst")
        roles.grant(conn, name, namespace)
    assert password is not None
    return roles.role_url(libpq_url(settings), name, password)


def _unreadable_listed(url: str, schema: str) -> list[str]:
    """What a BI tool's sync lists in the schema (SQLAlchemy's inspector, as Superset lists tables and views)
    that the role cannot select from."""
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        inspector = inspect(engine)
        listed = inspector.get_table_names(schema) + inspector.get_view_names(schema)
        unreadable = []
        for name in listed:
            with engine.connect() as conn:
                try:
                    conn.execute(text(f'select * from "{schema}"."{name}" limit 0'))
                except DBAPIError:
                    unreadable.append(name)
        assert listed, "the analyst's schema lists the marts"
        return unreadable
    finally:
        engine.dispose()


def _artifact(flow_run_id: str, key: str) -> list[dict[str, Any]]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with get_client(sync_client=True) as client:
        found = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    data = next(artifact.data for artifact in found if artifact.key == key)
    return json.loads(data) if isinstance(data, str) else list(data)


def test_the_weekly_builds_the_marts_and_analysts_read_only_their_namespaces(
    prefect_harness: None,
    settings: Settings,
    engine: Engine,
    access_data: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flows.weekly import weekly

    monkeypatch.setenv("STRATAFLOW_ANALYTICS_AFTER_WEEKLY", "true")
    state = weekly(WeeklyParams(namespace=access_data.namespace), return_state=True)
    assert state.is_completed(), state.message
    summary = state.result()
    assert summary.status == "completed", summary.errors
    results = _artifact(summary.prefect_flow_run_id, "analytics-build")
    by_node = {row["node"]: row["status"] for row in results}
    assert {by_node[mart] for mart in MARTS} == {"success"}
    assert {row["status"] for row in results if row["type"] == "test"} <= {"pass", "warn"}
    assert sum(row["type"] == "test" for row in results) >= 8

    ns = access_data.namespace
    with engine.connect() as conn:
        for mart in MARTS:
            owner = conn.execute(OWNER, {"relation": f"analytics.{mart}"}).one()
            assert (owner.rolname, owner.rolsuper, owner.rolbypassrls) == ("strataflow_dbt", False, False)
            assert (owner.pub_create, owner.writable) == (False, 0)
        weeks = conn.execute(
            text("select count(distinct week_start) from analytics.mart_memory_growth where namespace = :ns"),
            {"ns": ns},
        ).scalar_one()
        assert weeks >= 3, "items land in the event weeks of the dataset's six weeks"
        cost = conn.execute(
            text("select sum(calls), sum(total_tokens) from analytics.mart_llm_cost where namespace = :ns"),
            {"ns": ns},
        ).one()
        assert cost[0] > 0 and cost[1] > 0
        subjects = conn.execute(
            text("select sum(subjects) from analytics.mart_profile_completeness where namespace = :ns"),
            {"ns": ns},
        ).scalar_one()
        assert subjects == 2

    mine = _analyst(engine, settings, ns)
    stranger = _analyst(engine, settings, f"t_nobody_{uuid.uuid4().hex[:6]}")
    query = "select distinct namespace from analytics.mart_memory_growth"
    with psycopg.connect(mine) as conn:
        assert [row[0] for row in conn.execute(query)] == [ns]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("select * from analytics_staging.stg_memories")
    assert _unreadable_listed(mine, "analytics") == []
    with psycopg.connect(stranger) as conn:
        assert conn.execute(query).fetchall() == []

    from strataflow.cli import app

    shown = CliRunner().invoke(app, ["analytics", "docs"])
    assert shown.exit_code == 0, shown.output
    target = Path(shown.output.strip().splitlines()[-1].rsplit(" in ", 1)[1])
    catalog = json.loads((target / "catalog.json").read_text())
    manifest = json.loads((target / "manifest.json").read_text())
    for mart in MARTS:
        columns = catalog["nodes"][f"model.strataflow.{mart}"]["columns"]
        described = manifest["nodes"][f"model.strataflow.{mart}"]["columns"]
        assert columns and all(described[name.lower()]["description"] for name in columns), mart
    # source freshness follows the schedules, on the runs: a run started just now, so pipeline_runs is fresh
    fresh = CliRunner().invoke(app, ["analytics", "freshness"])
    statuses = {}
    for line in fresh.output.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == "source":
            statuses[parts[2]] = parts[0]
    assert statuses.get("pipeline_runs") == "pass", fresh.output
    assert "memories" not in statuses  # data that changes only with new messages has no freshness
