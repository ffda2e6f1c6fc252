"""`strataflow ingest logs` and `strataflow sample`: conversation logs into L1 (assets: commands/embed.py)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import typer

from strataflow.commands.common import cli_errors, settings_or_exit
from strataflow.errors import UserError

ingest_app = typer.Typer(
    help="Ingest conversation logs (L1) and data assets (long-term).", no_args_is_help=True
)


@ingest_app.command("logs")
def logs(
    paths: list[str] = typer.Argument(None, help="Files, directories (their top-level log files) or globs."),
    namespace: str = typer.Option(
        None, "--namespace", "-n", help="Namespace for every record (wins over theirs)."
    ),
    fmt: str = typer.Option("auto", "--format", "-f", help="auto, jsonl, json, csv, parquet, locomo or sql."),
    source: str = typer.Option(
        None, "--source", help="Source name for the whole run (default: the file name)."
    ),
    query: str = typer.Option(None, "--query", help="With --format sql: the select statement to read."),
    url: str = typer.Option(
        None, "--url", help="With --format sql: a SQLAlchemy URL of the source database."
    ),
    maps: list[str] = typer.Option(None, "--map", help="Rename a source column: src=dst (repeatable)."),
    mapping_file: Path = typer.Option(
        None, "--mapping", help="YAML/TOML file of source_column: field pairs."
    ),
) -> None:
    """Ingest conversation logs into L1: validate (bad records to quarantine), enrich, upsert.

    Records are the canonical message (conversation_id, subject_id, source_message_id, role, content,
    created_at; optionally namespace, source, agent_id, lang, metadata). Re-ingesting a file inserts
    nothing; an unchanged file is skipped by its checksum; changed content updates the message.

    Example: strataflow ingest logs ./sample --namespace demo
    """
    from strataflow.ingest.readers import FORMATS, ReaderError, load_mapping
    from strataflow.pipeline.ingest import ingest_logs

    settings = settings_or_exit()
    with cli_errors():
        if fmt not in FORMATS:
            raise UserError(f"--format {fmt!r}: use one of {', '.join(FORMATS)}")
        if fmt == "sql" and (not query or not url):
            raise UserError("--format sql needs --url URL and --query 'select ...'")
        if fmt != "sql" and not paths:
            raise UserError("give at least one file, directory or glob to ingest")
        try:
            mapping = load_mapping(maps, mapping_file)
            result = ingest_logs(
                settings,
                paths or [],
                namespace=namespace,
                fmt=fmt,
                source=source,
                mapping=mapping,
                sql_url=url,
                sql_query=query,
            )
        except ReaderError as exc:
            raise UserError(str(exc)) from None
    typer.echo(
        f"read {result.read}, inserted {result.inserted}, updated {result.updated}, "
        f"skipped {result.skipped}, quarantined {result.quarantined} "
        f"({result.files} source(s), {result.files_skipped} unchanged)"
    )
    if result.quarantined:
        typer.echo(
            "quarantined records: see the quarantine table (reason, field, error, raw_record)", err=True
        )


def sample(
    out: Path = typer.Option(..., "--out", "-o", help="Directory to write the sample into."),
    subjects: int = typer.Option(
        3, "--subjects", min=1, max=20, help="Subjects per kind (consulting, project)."
    ),
    weeks: int = typer.Option(6, "--weeks", min=1, max=26, help="Weeks of history, ending at --end-date."),
    seed: int = typer.Option(
        7, "--seed", help="Random seed: the same seed and end date give identical files."
    ),
    end_date: str = typer.Option(None, "--end-date", help="Last day (YYYY-MM-DD); default yesterday."),
) -> None:
    """Write deterministic bilingual sample logs, their facts sidecar and a few data assets.

    Chinese immigration-consulting dialogs and English project-team chats (no real personal data) as
    DIR/*.jsonl, the facts each dialog states in DIR/facts/facts.jsonl, assets in DIR/assets/.

    Example: strataflow sample --out ./sample --seed 7
    """
    from strataflow.demo.sample import write_sample

    settings = settings_or_exit()
    with cli_errors():
        try:
            last_day = date.fromisoformat(end_date) if end_date else None
        except ValueError:
            raise UserError(f"--end-date {end_date!r}: expected YYYY-MM-DD") from None
        summary = write_sample(
            out, subjects=subjects, weeks=weeks, seed=seed, end_date=last_day, tz=settings.tz
        )
    typer.echo(
        f"wrote {summary.messages} messages ({summary.subjects} subjects), {summary.facts} facts and "
        f"{summary.assets} assets to {out}"
    )


def register(app: typer.Typer) -> None:
    """Add this area's commands to the strataflow app."""
    app.add_typer(ingest_app, name="ingest")
    app.command("sample")(sample)
