"""`strataflow ingest ...` and `strataflow sample`: conversation logs into L1 (assets: see commands/embed.py)."""

from __future__ import annotations

import typer

ingest_app = typer.Typer(help="Ingest conversation logs (L1) and data assets (long-term).", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add this area's commands to the strataflow app."""
    app.add_typer(ingest_app, name="ingest")
