"""What every command shares: loading settings once and turning our errors into a clean exit."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import typer

from strataflow import telemetry
from strataflow.config import Settings, SettingsError, load_settings
from strataflow.errors import UserError

R = TypeVar("R")


def _known_errors() -> tuple[type[BaseException], ...]:
    from strataflow.db.engine import DatabaseError
    from strataflow.db.migrations import MigrationError
    from strataflow.db.roles import AccessError

    return (SettingsError, UserError, DatabaseError, MigrationError, AccessError)


@contextmanager
def cli_errors() -> Iterator[None]:
    """Print errors we can name as one readable line on stderr and exit 1; anything else is a bug."""
    try:
        yield
    except _known_errors() as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


def settings_or_exit() -> Settings:
    try:
        settings = load_settings()
    except SettingsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    return settings


def stderr(message: str) -> None:
    print(message, file=sys.stderr)


def recorded_run(
    settings: Settings,
    flow: str,
    parameters: dict[str, Any],
    namespace: str | None,
    work: Callable[[uuid.UUID], R],
    user_errors: tuple[type[Exception], ...] = (),
) -> R:
    """Run one CLI stage inside a pipeline_runs row (the run recorder, strataflow/pipeline/runs.py); our
    errors and `user_errors` become a clean exit 1."""
    from strataflow.db.engine import engine_for
    from strataflow.ops.run_metrics import write_textfile
    from strataflow.pipeline.runs import record_run

    telemetry.configure_from(settings, "strataflow-cli")  # OTLP spans of the stage, when configured
    with cli_errors():
        try:
            return record_run(engine_for(settings), flow, parameters, namespace, work)
        except user_errors as exc:
            raise UserError(str(exc)) from None
        finally:
            write_textfile(settings)  # the runs' counts for node_exporter's textfile collector


def report_failures(result: Any) -> None:
    """After a CLI stage: print the failed units of an LLM stage on stderr; exit 1 when every one failed
    (the run was recorded failed), else the run completed (with errors) and the command exits 0."""
    from models.results import LLMStageResult

    if not isinstance(result, LLMStageResult) or not result.units_failed:
        return
    for error in result.errors:
        typer.echo(f"error: {error}", err=True)
    if result.all_failed():
        typer.echo(
            f"failed: every unit ({result.units_failed}) failed; see llm_calls for each request", err=True
        )
        raise typer.Exit(1)
    typer.echo(
        f"completed with errors: {result.units_failed} unit(s) failed and are retried by the next run",
        err=True,
    )
