"""What every command shares: loading settings once and turning our errors into a clean exit."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import typer

from strataflow.config import Settings, SettingsError, load_settings

R = TypeVar("R")


class UserError(RuntimeError):
    """An error the user can fix; the CLI prints its message without a traceback and exits 1."""


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
        return load_settings()
    except SettingsError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None


def stderr(message: str) -> None:
    print(message, file=sys.stderr)


def recorded_run(
    settings: Settings,
    flow: str,
    parameters: dict[str, Any],
    namespace: str | None,
    work: Callable[[uuid.UUID], R],
    user_errors: tuple[type[Exception], ...] = (),
    failed: Callable[[R], bool] = lambda result: False,
) -> R:
    """Run one CLI stage inside a pipeline_runs row: completed (or budget_stopped, or failed when `failed`
    says so) with the result's counts, or failed with the error. `user_errors` become a clean exit 1."""
    from strataflow.db.engine import engine_for
    from strataflow.ops.runs import finish_run, start_run

    with cli_errors():
        engine = engine_for(settings)
        run_id = start_run(engine, flow, parameters, namespace=namespace)
        try:
            result = work(run_id)
        except user_errors as exc:
            finish_run(engine, run_id, "failed", error=str(exc))
            raise UserError(str(exc)) from None
        except BaseException as exc:
            finish_run(engine, run_id, "failed", error=f"{exc.__class__.__name__}: {exc}")
            raise
        if failed(result):
            status = "failed"
        elif getattr(result, "budget_stopped", False):
            status = "budget_stopped"
        else:
            status = "completed"
        finish_run(engine, run_id, status, result.model_dump(mode="json"))  # type: ignore[attr-defined]
    return result
