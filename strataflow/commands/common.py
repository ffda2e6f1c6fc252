"""What every command shares: loading settings once and turning our errors into a clean exit."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import typer

from strataflow.config import Settings, SettingsError, load_settings


class UserError(RuntimeError):
    """An error the user can fix; the CLI prints its message without a traceback and exits 1."""


def _known_errors() -> tuple[type[BaseException], ...]:
    from strataflow.database import DatabaseError
    from strataflow.migrations import MigrationError

    return (SettingsError, UserError, DatabaseError, MigrationError)


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
