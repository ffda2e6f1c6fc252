"""`strataflow embed` (embeddings for every layer) and `strataflow ingest assets` (data assets, long-term)."""

from __future__ import annotations

from pathlib import Path

import typer

from strataflow.commands.common import recorded_run, settings_or_exit
from strataflow.commands.ingest import ingest_app


def embed(
    reembed: bool = typer.Option(False, "--reembed", help="Also re-embed rows embedded with another model."),
    namespace: str = typer.Option(None, "--namespace", "-n", help="Only this namespace (default: all)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar on stderr."),
) -> None:
    """Embed every row without an embedding: L1 messages, L2 items, weekly reports, insights, asset chunks.

    Identical texts are encoded once (embedding_cache by model and content hash); a rerun encodes nothing.
    After changing STRATAFLOW_EMBEDDING_MODEL, --reembed replaces vectors made by the previous model.

    Example: strataflow embed --namespace acme
    """
    from strataflow.llm.embeddings import EmbeddingError
    from strataflow.pipeline.embed import embed_pending

    settings = settings_or_exit()
    parameters = {"reembed": reembed, "namespace": namespace}
    result = recorded_run(
        settings,
        "embed",
        parameters,
        namespace,
        lambda _run_id: embed_pending(settings, reembed, progress, namespace),
        user_errors=(EmbeddingError,),
    )
    per_table = ", ".join(
        f"{name} {getattr(result, name)}"
        for name in ("conversation_messages", "memory_items", "weekly_reports", "insights", "asset_chunks")
    )
    typer.echo(f"embedded {result.embedded} row(s) with {result.model} ({per_table})")
    typer.echo(f"encoded {result.encoded} text(s), {result.cache_hits} from the cache")


ASSET_PATHS = typer.Argument(
    None, help="Asset files or directories (.md .txt .csv .tsv .parquet .json .jsonl)."
)


def ingest_assets(
    paths: list[Path] = ASSET_PATHS,
    namespace: str = typer.Option(..., "--namespace", "-n", help="Namespace the assets belong to."),
    url: str = typer.Option(
        None, "--url", help="SQLAlchemy URL of a database to read a table or query from."
    ),
    table: str = typer.Option(None, "--table", help="With --url: the table to ingest (schema.table works)."),
    query: str = typer.Option(None, "--query", help="With --url: a SELECT whose rows form the asset."),
) -> None:
    """Ingest data assets into long-term memory (asset_documents + embedded, full-text-indexed asset_chunks).

    Text is split on headings and paragraphs into overlapping chunks of about 200 tokens; tables become
    groups of rows under their header. An unchanged asset is skipped; a changed one replaces its chunks
    in one transaction (version + 1). Unreadable files go to quarantine; the others continue.

    Example: strataflow ingest assets docs/ prices.csv --namespace acme
    """
    from strataflow.llm.embeddings import EmbeddingError
    from strataflow.pipeline.assets import ingest_assets as run_ingest_assets

    if not paths and url is None:
        typer.echo("error: name at least one asset path, or --url with --table or --query", err=True)
        raise typer.Exit(1)
    if url is not None and (table is None) == (query is None):
        typer.echo("error: --url needs exactly one of --table or --query", err=True)
        raise typer.Exit(1)
    missing = [str(p) for p in paths or [] if not p.exists()]
    if missing:
        typer.echo(f"error: no such file or directory: {', '.join(missing)}", err=True)
        raise typer.Exit(1)
    settings = settings_or_exit()
    parameters = {"paths": [str(p) for p in paths or []], "url": url is not None, "table": table}
    result = recorded_run(
        settings,
        "ingest-assets",
        parameters,
        namespace,
        lambda run_id: run_ingest_assets(
            settings, paths or [], namespace, run_id, url=url, table=table, query=query
        ),
        user_errors=(EmbeddingError,),
    )
    typer.echo(
        f"assets {result.assets}: inserted {result.inserted}, replaced {result.replaced}, "
        f"unchanged {result.unchanged}, quarantined {result.quarantined}"
    )
    typer.echo(
        f"chunks written {result.chunks_written}, deleted {result.chunks_deleted}; "
        f"encoded {result.encoded}, {result.cache_hits} from the cache"
    )


def register(app: typer.Typer) -> None:
    """Add `strataflow embed` and `strataflow ingest assets`."""
    app.command("embed")(embed)
    ingest_app.command("assets")(ingest_assets)
