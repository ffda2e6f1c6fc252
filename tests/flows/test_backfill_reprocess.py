"""A backfill that recomputes, under the session's Prefect API: the dry run's plan, then a reprocess with a
second model name (offline/rules-v2, the same rules), then the same reprocess again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from models.params import BackfillParams, Stage

SELECT_CALLS = text(
    """
    select stage, count(*) as calls, sum(prompt_tokens) as prompt_tokens from llm_calls
    where namespace = :ns and run_id = :run_id group by stage
    """
)
COUNT_CALLS = text("select count(*) from llm_calls where namespace = :ns")
SELECT_ITEM_LINEAGE = text(
    """
    select model, confirmed_model, confirmed_run_id::text, version, count(*) from memory_items
    where namespace = :ns and kind <> 'hot_summary' group by 1, 2, 3, 4
    """
)
SELECT_REPORTS = text(
    """
    select r.subject_id, r.week_start, r.revision, r.model, v.revision as old_revision, v.model as old_model,
           v.summary = r.summary as same_summary
    from weekly_reports as r join weekly_report_revisions as v using (report_id)
    where r.namespace = :ns order by 1, 2
    """
)


def _run(flow: Any, params: Any) -> Any:
    state = flow(params, return_state=True)
    assert state.is_completed(), state.message
    return state.result()


def _artifacts(flow_run_id: str) -> dict[str, str]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterFlowRunId

    with get_client(sync_client=True) as client:
        artifacts = client.read_artifacts(
            artifact_filter=ArtifactFilter(flow_run_id=ArtifactFilterFlowRunId(any_=[flow_run_id]))
        )
    return {artifact.key: str(artifact.data) for artifact in artifacts if artifact.key}


def test_a_dry_run_plans_without_calling_and_a_reprocess_with_a_new_model_recomputes_once(
    prefect_harness: None,
    engine: Engine,
    namespace: str,
    tmp_path: Path,
    write_daily_logs: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from flows.backfill import backfill

    files = write_daily_logs(tmp_path / "logs", tag=namespace)
    start, end = files[0].stem.removeprefix("chat-"), files[-1].stem.removeprefix("chat-")
    base = {"start": start, "end": end, "paths": [str(tmp_path / "logs")], "namespace": namespace}
    _run(backfill, BackfillParams(**base))  # everything, with offline/rules
    stages = [Stage.extract, Stage.rollup, Stage.hot_memory]
    with engine.connect() as conn:
        before = conn.execute(COUNT_CALLS, {"ns": namespace}).scalar_one()

    for stage in ("EXTRACT", "ROLLUP"):
        monkeypatch.setenv(f"STRATAFLOW_{stage}_MODEL", "offline/rules-v2")
    dry = _run(backfill, BackfillParams(**base, stages=stages, reprocess=True, dry_run=True))
    with engine.connect() as conn:
        assert conn.execute(COUNT_CALLS, {"ns": namespace}).scalar_one() == before
    assert dry.plan is not None and dry.counts.llm_calls == 0
    artifacts = _artifacts(dry.prefect_flow_run_id)
    assert "backfill-plan" in artifacts and "Requests the run would send" in artifacts["backfill-plan"]
    planned = {name: stage for name, stage in dry.plan.stages.items()}
    assert planned["extract"].model == "offline/rules-v2" and planned["extract"].already_current == 0
    assert planned["rollup"].llm_calls == 4  # two subjects x two weeks, all written by offline/rules

    real = _run(backfill, BackfillParams(**base, stages=stages, reprocess=True))
    with engine.connect() as conn:
        rows = conn.execute(SELECT_CALLS, {"ns": namespace, "run_id": real.run_id})
        spent = {row.stage: row for row in rows}
        lineage = [tuple(row) for row in conn.execute(SELECT_ITEM_LINEAGE, {"ns": namespace})]
        reports = [tuple(row) for row in conn.execute(SELECT_REPORTS, {"ns": namespace})]
    plan_stage = {"extract": "extract", "rollup": "rollup", "hot_summary": "hot_memory"}
    for stage, row in spent.items():
        estimate = planned[plan_stage[stage]]
        assert row.calls == estimate.llm_calls, stage
        assert abs(row.prompt_tokens - estimate.prompt_tokens) <= 0.1 * row.prompt_tokens, stage
    assert sum(row.calls for row in spent.values()) == dry.plan.llm_calls_planned > 0
    # the same rules under a new name: values unchanged, each item records the model and run that confirmed it
    assert [entry[:4] for entry in lineage] == [("offline/rules", "offline/rules-v2", real.run_id, 1)]
    # every report rewritten as revision 2 by the new model; revision 1 kept with the old model
    assert len(reports) == 4
    assert {report[2:6] for report in reports} == {(2, "offline/rules-v2", 1, "offline/rules")}

    # a dry run now: every request is current, so the totals are what would be sent (nothing), shown apart
    current = _run(backfill, BackfillParams(**base, stages=[Stage.extract, Stage.rollup], reprocess=True,
                                            dry_run=True)).plan  # fmt: skip
    assert current is not None
    assert (current.llm_calls_planned, current.prompt_tokens_estimated) == (0, 0)
    assert current.llm_calls_already_current > 0 and current.prompt_tokens_already_current > 0
    assert current.range_summary().startswith(f"{current.days} day(s) {start}..{end}") and current.days > 1

    again = _run(backfill, BackfillParams(**base, stages=stages, reprocess=True))
    assert again.counts.llm_calls == 0 and again.counts.weekly_reports_written == 0
    with engine.connect() as conn:
        assert [tuple(row) for row in conn.execute(SELECT_ITEM_LINEAGE, {"ns": namespace})] == lineage
