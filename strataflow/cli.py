"""The `strataflow` command; each command group lives in strataflow/commands/<area>.py and registers."""

from __future__ import annotations

import logging
import os
from importlib import import_module

import typer

from strataflow import __version__

app = typer.Typer(
    name="strataflow",
    help="Memory pipeline for LLM agents: Prefect flows writing L1/L2/L3 memory into PostgreSQL + pgvector.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

# One module per area; each has register(app). Imports inside commands stay lazy so --help is fast.
COMMAND_MODULES = (
    "db",
    "ingest",
    "embed",
    "extract",
    "lifecycle",
    "run",
    "memory",
    "access",
    "api",
    "docs",
    "protocols",
    "analytics",
    "notify",
    "transfer",
    "model",
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"strataflow {__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log progress details to stderr."),
) -> None:
    """strataflow: turn conversation logs and data assets into three-layer memory."""
    # What a command creates (STRATAFLOW_HOME and its folders, logs, reports, exports) is its user's alone:
    # folders 0700, files 0600 (secrets are written 0600 explicitly too).
    os.umask(0o077)
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(message)s"
    )


for _name in COMMAND_MODULES:
    import_module(f"strataflow.commands.{_name}").register(app)


if __name__ == "__main__":
    app()
