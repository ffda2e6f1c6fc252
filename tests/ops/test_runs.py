"""The run recorder (strataflow/pipeline/runs.py) and the `strataflow run` options generated from the
parameter models."""

from __future__ import annotations

import uuid

import pytest
import typer
from sqlalchemy import Engine, text

from models.lifecycle import ReflectResult, RollupResult
from models.results import ExtractResult, IngestResult
from strataflow.cli import app
from strataflow.ops.flow_runner import PARAMS
from strataflow.pipeline import runs

SELECT_RUN = text("select flow, status, counts, error from pipeline_runs where run_id = :run_id")


def _failed(result: ExtractResult, units: int) -> ExtractResult:
    for number in range(units):
        result.add_failure(runs.scope_ref("acme", f"user-{number}"), RuntimeError("timeout"))
    return result


@pytest.mark.parametrize(
    ("results", "expected"),
    [
        # nothing failed: quarantined rows are counted, not failures
        ([IngestResult(read=3, quarantined=1), ExtractResult(scopes=2)], "completed"),
        # one of two scopes failed: the other was done
        ([_failed(ExtractResult(scopes=2), 1)], "completed_with_errors"),
        # every scope the stage attempted failed
        ([_failed(ExtractResult(scopes=2), 2)], "failed"),
        # a budget stop is a clean stop ...
        ([ReflectResult(scopes=1, budget_stopped=True)], "budget_stopped"),
        # ... but never hides a failed unit
        ([_failed(ExtractResult(scopes=3, budget_stopped=True), 1)], "completed_with_errors"),
        # the rollup's units are the scope-weeks that needed the model, not the unchanged ones
        ([RollupResult(weeks_considered=5, unchanged=4, units_failed=1)], "failed"),
        # merged stage results of a flow are dicts
        ([{"units_failed": 1, "errors": ["x"]}, {"read": 4}], "completed_with_errors"),
    ],
)
def test_the_final_state_follows_the_failure_policy(results: list[object], expected: str) -> None:
    assert runs.run_status(results) == expected


def test_a_scope_is_named_by_namespace_and_hash_never_by_subject_id() -> None:
    ref = runs.scope_ref("acme", "user-42")
    assert ref.startswith("acme/sha256:") and len(ref) == len("acme/sha256:") + 12
    assert "user-42" not in ref and ref != runs.scope_ref("acme", "user-43")


def test_a_recorded_run_keeps_counts_and_hashed_errors_but_no_subject_names(engine: Engine) -> None:
    result = _failed(ExtractResult(scopes=2, messages=7), 1)
    result.manual_conflicts.append({"subject_id": "user-0", "key": "age"})

    seen: list[uuid.UUID] = []

    def work(run_id: uuid.UUID) -> ExtractResult:
        seen.append(run_id)
        return result

    assert runs.record_run(engine, "extract", {}, None, work) is result
    with engine.connect() as conn:
        row = conn.execute(SELECT_RUN, {"run_id": seen[0]}).mappings().one()
    assert (row["flow"], row["status"], row["counts"]["messages"], row["counts"]["units_failed"]) == (
        "extract",
        "completed_with_errors",
        7,
        1,
    )
    assert row["error"] == result.errors[0] and "user-0" not in str(dict(row))


def test_work_that_raises_is_recorded_failed_and_the_error_goes_on(engine: Engine) -> None:
    seen: list[uuid.UUID] = []

    def work(run_id: uuid.UUID) -> None:
        seen.append(run_id)
        raise ValueError("the inbox is not readable")

    with pytest.raises(ValueError, match="inbox"):
        runs.record_run(engine, "ingest", {}, None, work)

    with engine.connect() as conn:
        row = conn.execute(SELECT_RUN, {"run_id": seen[0]}).mappings().one()
    assert dict(row) == {
        "flow": "ingest",
        "status": "failed",
        "counts": {},
        "error": runs.recorded_error(ValueError("the inbox is not readable")),
    }


def test_every_run_option_is_a_parameter_model_field_with_its_description_as_help() -> None:
    group = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    for name, model in PARAMS.items():
        command = group.commands[name]
        options = {param.name: param for param in command.params if param.name != "help"}
        assert sorted(options) == sorted(model.model_fields), name
        for field_name, field in model.model_fields.items():
            assert options[field_name].help.startswith(field.description), (name, field_name)
            assert options[field_name].required == field.is_required(), (name, field_name)
        assert "Example: strataflow run " + name in (command.help or "")


def test_list_options_take_repeated_and_comma_separated_values() -> None:
    from strataflow.commands.run import _cli_value

    stages = PARAMS["backfill"].model_fields["stages"].annotation
    assert _cli_value(stages, ["ingest,embed", " rollup "]) == ["ingest", "embed", "rollup"]
    assert _cli_value(stages, None) is None
