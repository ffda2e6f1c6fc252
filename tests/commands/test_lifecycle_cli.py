"""The lifecycle commands: runs recorded with counts, clear errors for bad options."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import text
from typer.testing import CliRunner

from strataflow.cli import app

runner = CliRunner()


def test_expire_force_without_a_reason_is_refused_with_a_clear_error():
    result = runner.invoke(app, ["expire", "--force"])

    assert result.exit_code == 1
    assert "--force needs --reason" in result.output


def test_rollup_and_expire_commands_record_their_runs_and_print_counts(
    engine, add_messages, namespace, old_monday
):
    add_messages(namespace, "u1", [(old_monday + timedelta(hours=9), "user", "We ship on Friday.")])

    rolled = runner.invoke(app, ["rollup", "--namespace", namespace])
    dry = runner.invoke(app, ["expire", "--dry-run", "--namespace", namespace])

    assert rolled.exit_code == 0, rolled.output
    assert "reports written 1" in rolled.output
    assert dry.exit_code == 0, dry.output
    assert "would remove 1" in dry.output
    with engine.connect() as conn:
        runs = conn.execute(
            text("select flow, status, counts from pipeline_runs where namespace = :ns order by started_at"),
            {"ns": namespace},
        ).all()
    assert [(r.flow, r.status) for r in runs] == [("rollup", "completed"), ("expire", "completed")]
    assert runs[0].counts["reports_written"] == 1 and runs[1].counts["removed_rows"] == 1


def test_every_lifecycle_command_has_help_with_an_example():
    for command in ("rollup", "reflect", "expire", "forget"):
        result = runner.invoke(app, [command, "--help"])
        assert result.exit_code == 0 and "Example:" in result.output
