"""The flows under a real Prefect API (the session's test harness) against the session's embedded database."""

from __future__ import annotations

from importlib import import_module
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import Engine, text

from models.params import BackfillParams, NightlyParams, Stage, WeeklyParams

PROJECT_ROOT = Path(__file__).resolve().parents[2]

SELECT_RUN = text(
    "select flow, status, prefect_flow_run_id, counts from pipeline_runs where run_id = :run_id"
)
SELECT_ITEMS = text(
    """
    select subject_id, kind, key, value from memory_items
    where namespace = :ns and kind <> 'hot_summary' and status = 'active'
    order by subject_id, kind, key
    """
)
SELECT_REPORT_WEEKS = text(
    "select subject_id, week_start from weekly_reports where namespace = :ns order by subject_id, week_start"
)
COUNT_RUN_CALLS = text("select count(*) from llm_calls where run_id = :run_id")


def test_every_prefect_yaml_entrypoint_imports_a_flow_of_the_deployment_name() -> None:
    from prefect.events import DeploymentEventTrigger

    spec = yaml.safe_load((PROJECT_ROOT / "prefect.yaml").read_text())
    deployments = {d["name"]: d for d in spec["deployments"]}
    assert sorted(deployments) == [
        "analytics",
        "assets",
        "backfill",
        "fresh",
        "incremental",
        "nightly",
        "weekly",
    ]
    for name, deployment in deployments.items():
        path, function = deployment["entrypoint"].split(":")
        module = import_module(path.removesuffix(".py").replace("/", "."))
        flow = getattr(module, function)
        assert flow.name == name  # the deployment is addressed as '<flow name>/<deployment name>'
        assert deployment["concurrency_limit"] == 1
    trigger = DeploymentEventTrigger(**deployments["analytics"]["triggers"][0])  # valid, chained to weekly
    assert trigger.expect == {"strataflow.run.completed"} and trigger.match["strataflow.flow"] == ["weekly"]
    fresh = DeploymentEventTrigger(**deployments.pop("fresh")["triggers"][0])  # on every accepted write
    assert fresh.expect == {"strataflow.messages.received"} and fresh.for_each == {"prefect.resource.id"}
    assert fresh.within.total_seconds() <= 10 and fresh.parameters == {
        "namespace": "{{ event.resource['strataflow.namespace'] }}"
    }
    incremental = deployments.pop("incremental")
    assert [s["interval"] for s in incremental["schedules"]] == [600]  # at most 15 minutes
    crons = {name: [s["cron"] for s in d["schedules"]] for name, d in deployments.items()}
    assert crons == {
        "nightly": ["0 2 * * *"],
        "weekly": ["0 3 * * 1"],
        "assets": ["0 1 * * *"],
        "backfill": [],
        "analytics": [],
    }


def _run(flow: Any, params: Any) -> Any:
    state = flow(params, return_state=True)
    assert state.is_completed(), state.message
    return state.result()


def _artifact_keys(flow_run_id: str) -> set[str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    return {artifact.key for artifact in artifacts if artifact.key}


def _items(engine: Engine, namespace: str) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(SELECT_ITEMS, {"ns": namespace})]


def _report_weeks(engine: Engine, namespace: str) -> list[tuple[Any, ...]]:
    with engine.connect() as conn:
        return [tuple(row) for row in conn.execute(SELECT_REPORT_WEEKS, {"ns": namespace})]


def test_nightly_then_weekly_fill_all_three_layers_and_record_their_runs(
    prefect_harness: None, engine: Engine, namespace: str, tmp_path: Path, write_daily_logs: Any, layers: Any
) -> None:
    from flows.nightly import nightly
    from flows.weekly import weekly

    write_daily_logs(tmp_path / "logs", tag=namespace)
    night = _run(nightly, NightlyParams(paths=[str(tmp_path / "logs")], namespace=namespace))
    week = _run(weekly, WeeklyParams(namespace=namespace))

    counts = layers(namespace)
    assert counts["l1"] == counts["l1_keys"] == 9 and counts["l1_unembedded"] == 0
    assert counts["l2"] > 0 and counts["l3"] == 4  # two subjects x two weeks
    assert (night.counts.rows_read, night.counts.rows_inserted, night.counts.rows_quarantined) == (9, 9, 0)
    assert night.counts.llm_calls > 0 and night.counts.l2_new > 0
    assert week.counts.weekly_reports_written == 4
    with engine.connect() as conn:
        for summary in (night, week):
            row = conn.execute(SELECT_RUN, {"run_id": summary.run_id}).mappings().one()
            assert (row["flow"], row["status"]) == (summary.flow, "completed")
            assert str(row["prefect_flow_run_id"]) == summary.prefect_flow_run_id
            assert row["counts"]["llm_calls"] == summary.counts.llm_calls
    assert _artifact_keys(night.prefect_flow_run_id) == {"nightly-summary", "nightly-counts"}


def test_a_rerun_of_a_finished_nightly_makes_no_llm_call_and_no_encode(
    prefect_harness: None, engine: Engine, namespace: str, tmp_path: Path, write_daily_logs: Any
) -> None:
    from flows.nightly import nightly
    from strataflow.llm.embeddings import encode_count

    write_daily_logs(tmp_path / "logs", tag=namespace)
    params = NightlyParams(paths=[str(tmp_path / "logs")], namespace=namespace)
    first = _run(nightly, params)
    items = _items(engine, namespace)
    encodes = encode_count()
    second = _run(nightly, params)

    assert first.counts.llm_calls > 0 and first.counts.encodes > 0
    assert encode_count() == encodes
    assert (second.counts.llm_calls, second.counts.encodes, second.counts.rows_inserted) == (0, 0, 0)
    with engine.connect() as conn:
        assert conn.execute(COUNT_RUN_CALLS, {"run_id": second.run_id}).scalar_one() == 0
    assert _items(engine, namespace) == items


def test_a_backfill_over_a_range_gives_the_same_tables_as_nightly_runs_day_by_day(
    prefect_harness: None, engine: Engine, tmp_path: Path, write_daily_logs: Any, layers: Any
) -> None:
    from flows.backfill import backfill
    from flows.nightly import nightly
    from flows.weekly import weekly

    nightly_ns, backfill_ns = "t_nightly_" + tmp_path.name[-8:], "t_backfill_" + tmp_path.name[-8:]
    files = write_daily_logs(tmp_path / "logs")
    for file in files:  # one night per daily export file
        _run(nightly, NightlyParams(paths=[str(file)], namespace=nightly_ns))
    _run(weekly, WeeklyParams(namespace=nightly_ns))

    start, end = files[0].stem.removeprefix("chat-"), files[-1].stem.removeprefix("chat-")
    stages = [Stage.ingest, Stage.embed, Stage.extract, Stage.rollup]
    params = BackfillParams(
        start=start, end=end, stages=stages, paths=[str(tmp_path / "logs")], namespace=backfill_ns
    )
    summary = _run(backfill, params)

    assert (summary.days, summary.weeks) == (3, 2)
    assert _items(engine, backfill_ns) == _items(engine, nightly_ns) != []
    assert _report_weeks(engine, backfill_ns) == _report_weeks(engine, nightly_ns) != []
    assert layers(backfill_ns) == layers(nightly_ns)


@pytest.mark.parametrize("bad", [{"start": "2024-03-10", "end": "2024-03-01"}, {"start": "2024-03-01"}])
def test_backfill_parameters_refuse_a_range_that_is_reversed_or_open(bad: dict[str, str]) -> None:
    with pytest.raises(ValueError):
        BackfillParams(**bad)
