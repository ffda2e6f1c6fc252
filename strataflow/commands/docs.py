"""`strataflow docs ...`: write the generated documentation pages (analyst guide, configuration table)."""

from __future__ import annotations

from pathlib import Path

import typer

docs_app = typer.Typer(help="Write the generated pages of docs/.", no_args_is_help=True)

DOCS_DIR_OPTION = typer.Option(None, "--docs-dir", help="Where to write. Default: the checkout's docs/.")
CHECK_OPTION = typer.Option(False, "--check", help="Write nothing; exit 1 when the page is out of date.")


def _write(name: str, docs_dir: Path | None, check: bool) -> None:
    from strataflow.ops import docs

    folder = docs_dir or docs.DOCS_DIR
    path = folder / f"{name}.md"
    if check:
        current = path.read_text(encoding="utf-8") if path.exists() else ""
        if current != docs.PAGES[name]():
            typer.echo(f"{path} is out of date: run strataflow docs {name}", err=True)
            raise typer.Exit(1)
        typer.echo(f"{path} is up to date")
        return
    typer.echo(f"wrote {docs.write_page(name, folder)}")


@docs_app.command("analyst-guide")
def analyst_guide(docs_dir: Path = DOCS_DIR_OPTION, check: bool = CHECK_OPTION) -> None:
    """Write docs/analyst-guide.md from the `comment on` statements of sql/ (views, functions, columns).

    Example: strataflow docs analyst-guide
    """
    _write("analyst-guide", docs_dir, check)


@docs_app.command("configuration")
def configuration(docs_dir: Path = DOCS_DIR_OPTION, check: bool = CHECK_OPTION) -> None:
    """Write docs/configuration.md: one row per setting of strataflow/config.py, with default and bounds.

    Example: strataflow docs configuration --check
    """
    _write("configuration", docs_dir, check)


def register(app: typer.Typer) -> None:
    """Add `docs` to the strataflow app."""
    app.add_typer(docs_app, name="docs")
