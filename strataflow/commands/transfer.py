"""`strataflow export` and `strataflow import`: a namespace's memory out to one file and back in (also from
mem0); the work is in strataflow/ops/transfer/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from strataflow.commands.common import cli_errors, recorded_run, settings_or_exit
from strataflow.errors import UserError

PROGRESS = typer.Option(True, "--progress/--no-progress", help="Show a progress bar on stderr.")


def export(
    namespace: str = typer.Option(..., "--namespace", "-n", help="The namespace to export."),
    subject: str = typer.Option(None, "--subject", "-s", help="Only this subject (assets stay out)."),
    out: Path = typer.Option(..., "--out", "-o", help="The file to write (.gz: compressed)."),
    progress: bool = PROGRESS,
) -> None:
    """Write every layer of a namespace to one versioned JSONL file: a header line (format version, source,
    counts), then per subject the keys of expired messages, watermarks, L1 messages, L2 items with their
    versions and lineage (entries included), insights, weekly reports with their revisions and both profile
    documents; then the namespace's data assets. Embeddings go along as stored.

    Example: strataflow export --namespace acme --out acme.export.jsonl
    """
    from strataflow.ops.transfer.export import export_namespace

    settings = settings_or_exit()
    with cli_errors():
        try:
            result = export_namespace(settings, namespace, out, subject_id=subject, progress=progress)
        except OSError as exc:
            raise UserError(f"cannot write {out}: {exc}") from None
    _table(f"export of {namespace}" + (f" (subject {subject})" if subject else ""), ["rows"],
           {layer: [count] for layer, count in result.counts.items()})  # fmt: skip
    rows = sum(count for layer, count in result.counts.items() if layer != "entries")
    if not rows:
        typer.echo(
            f"note: namespace {namespace!r} has no rows" + (f" of subject {subject!r}" if subject else ""),
            err=True,
        )
    typer.echo(f"wrote {rows} row(s) ({result.bytes:,} bytes) to {out}")


def import_(
    file: Path = typer.Argument(None, help="An export file (strataflow export)."),
    namespace: str = typer.Option(
        None, "--namespace", "-n", help="The namespace to import into (required: the file never chooses it)."
    ),
    replace: bool = typer.Option(
        False,
        "--replace",
        help="Where the target holds a row differently, write the file's content as its next version "
        "(default: keep the target's and report the conflict).",
    ),
    from_mem0: Path = typer.Option(
        None,
        "--from-mem0",
        help="Instead of FILE: a mem0 OSS config (Memory.from_config JSON) or a mem0 platform export JSON.",
    ),
    progress: bool = PROGRESS,
) -> None:
    """Import an export file into a namespace, one transaction per subject: ids renumbered, lineage kept,
    every line validated as an online write of its kind, bad lines to quarantine (source import:<file
    name>, position = line number); a row the target holds differently is kept and reported (--replace:
    the file's becomes its next version); importing it again adds no row. With --from-mem0, mem0's
    memories become entries (metadata.imported_from names their origin).

    Examples: strataflow import acme.export.jsonl --namespace acme_copy
              strataflow import --from-mem0 mem0-config.json --namespace acme
    """
    settings = settings_or_exit()
    if (file is None) == (from_mem0 is None):
        typer.echo("error: give an export FILE or --from-mem0 PATH (one of them)", err=True)
        raise typer.Exit(1)
    if not namespace:
        typer.echo(
            "error: give the namespace to import into: --namespace NS (a file never chooses it)", err=True
        )
        raise typer.Exit(1)
    source = file if file is not None else from_mem0
    if not source.is_file():
        typer.echo(f"error: no such file: {source}", err=True)
        raise typer.Exit(1)
    if from_mem0 is not None:
        _import_mem0(settings, from_mem0, namespace, progress)
        return
    from strataflow.ops.transfer.restore import import_file

    parameters = {"file": str(file), "namespace": namespace, "replace": replace}
    result = recorded_run(
        settings,
        "import",
        parameters,
        namespace,
        lambda run_id: import_file(settings, file, namespace, run_id, progress, replace),
        user_errors=(OSError,),
    )
    columns = ["read", "new", "updated", "unchanged", "kept", "quarantined"]
    rows = {name: [getattr(c, col) for col in columns] for name, c in result.layers.items() if c.read}
    _table(f"import into {result.namespace}", columns, rows)
    _problems(result.problems, result.quarantined, f"import:{file.name}")
    kept = sum(c.kept for c in result.layers.values())
    for conflict in result.conflicts:
        typer.echo(f"conflict: {conflict}", err=True)
    if kept > len(result.conflicts):
        typer.echo(f"... and {kept - len(result.conflicts)} more conflict(s)", err=True)
    notes = []
    if result.lineage_dropped:
        notes.append(f"{result.lineage_dropped} lineage id(s) named no message or item of the file")
    if result.embeddings_dropped:
        notes.append(f"{result.embeddings_dropped} vector(s) of another size left for `strataflow embed`")
    for note in notes:
        typer.echo(f"note: {note}", err=True)
    typer.echo(
        f"imported {result.lines} line(s) of {result.subjects} subject(s) into {result.namespace}: "
        f"{result.written()} row(s) written, {result.quarantined} line(s) quarantined"
    )


def _import_mem0(settings: Any, path: Path, namespace: str, progress: bool) -> None:
    from strataflow.ops.transfer.mem0 import Mem0Error, import_mem0

    result = recorded_run(
        settings,
        "import-mem0",
        {"path": str(path), "namespace": namespace},
        namespace,
        lambda run_id: import_mem0(settings, path, namespace, run_id, progress),
        user_errors=(OSError, Mem0Error),
    )
    columns = ["read", "new", "updated", "unchanged", "quarantined"]
    _table(
        f"mem0 {result.kind} into {namespace}", columns, {"entries": [getattr(result, c) for c in columns]}
    )
    _problems(result.problems, result.quarantined, result.label)
    typer.echo(
        f"imported {result.read} mem0 memories of {result.subjects} user(s) into {namespace}: "
        f"{result.new} new, {result.updated} updated, {result.quarantined} quarantined"
    )


def _table(title: str, columns: list[str], rows: dict[str, list[Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    table.add_column("layer")
    for column in columns:
        table.add_column(column, justify="right")
    for layer, values in rows.items():
        table.add_row(layer, *(f"{value:,}" for value in values))
    Console(soft_wrap=True).print(table)


def _problems(problems: list[str], quarantined: int, source: str) -> None:
    for problem in problems:
        typer.echo(f"quarantined: {problem}", err=True)
    if quarantined > len(problems):
        typer.echo(f"... and {quarantined - len(problems)} more", err=True)
    if quarantined:
        typer.echo(f"quarantined lines: see the quarantine table (source {source!r})", err=True)


def register(app: typer.Typer) -> None:
    """Add `strataflow export` and `strataflow import`."""
    app.command("export")(export)
    app.command("import")(import_)
