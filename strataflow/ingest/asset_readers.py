"""Reading data assets: files (Markdown/text, CSV/TSV, Parquet, JSON/JSONL) and SQL tables or queries into
chunks (strataflow/ingest/chunking.py), with the checksum that decides whether an asset changed.
No writes here.

A file that cannot be used raises AssetError (reason and field for quarantine); a bad JSONL line is kept
in ParsedAsset.bad_records while the good lines continue.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import text

from strataflow.hashes import content_hash
from strataflow.ingest.chunking import Chunk, chunk_json, chunk_records, chunk_rows, chunk_text

KINDS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".text": "text",
    ".rst": "text",
    ".csv": "csv",
    ".tsv": "csv",
    ".parquet": "parquet",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
}
TABLE_BATCH_ROWS = 5_000


class AssetError(ValueError):
    """An asset that cannot be read; field and reason go to quarantine with the message."""

    def __init__(self, message: str, reason: str, field: str | None = None, position: str = "file") -> None:
        super().__init__(message)
        self.reason, self.field, self.position = reason, field, position


@dataclass
class ParsedAsset:
    uri: str
    kind: str
    title: str
    checksum: str
    chunks: list[Chunk]
    metadata: dict[str, Any]
    bad_records: list[AssetError] = field(default_factory=list)  # JSONL lines that did not parse
    raw_lines: dict[str, str] = field(default_factory=dict)


def asset_files(paths: Iterable[str | Path]) -> list[Path]:
    """Files named, plus the files with a known extension under each directory named (sorted)."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            files.extend(p for p in sorted(path.rglob("*")) if p.is_file() and p.suffix.lower() in KINDS)
        else:
            files.append(path)
    return files


def parse_file(path: Path, checksum: str) -> ParsedAsset:
    """Chunks of one asset file; raises AssetError for a file that cannot be used at all."""
    kind = KINDS.get(path.suffix.lower())
    uri = path.resolve().as_uri()
    if kind is None:
        raise AssetError(
            f"{path}: unsupported asset type {path.suffix or '(none)'}; use one of "
            + ", ".join(sorted(KINDS)),
            "unsupported_format",
            "path",
        )
    asset = ParsedAsset(
        uri, kind, path.name, checksum, [], {"path": str(path.resolve()), "bytes": path.stat().st_size}
    )
    if kind in ("markdown", "text"):
        asset.chunks = chunk_text(_read_text(path), markdown=kind == "markdown")
    elif kind == "csv":
        asset.chunks = _csv_chunks(path)
    elif kind == "parquet":
        asset.chunks = _parquet_chunks(path)
    elif path.suffix.lower() == ".json":
        try:
            asset.chunks = chunk_json(path.name, json.loads(_read_text(path)))
        except json.JSONDecodeError as exc:
            raise AssetError(
                f"{path}: not valid JSON ({exc})", "bad_json", "content", f"line {exc.lineno}"
            ) from None
    else:
        asset.chunks = _jsonl_chunks(path, asset)
    return asset


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise AssetError(f"{path}: not UTF-8 text (byte {exc.start})", "bad_encoding", "content") from None


def _jsonl_chunks(path: Path, asset: ParsedAsset) -> list[Chunk]:
    records: list[tuple[int, Any]] = []
    for number, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            asset.bad_records.append(
                AssetError(
                    f"{path} line {number}: not valid JSON ({exc.msg})",
                    "bad_json",
                    "content",
                    f"line {number}",
                )
            )
            asset.raw_lines[f"line {number}"] = line
    return chunk_records(path.name, records)


def _csv_chunks(path: Path) -> list[Chunk]:
    import pandas as pd

    sep = "\t" if path.suffix.lower() == ".tsv" else ","
    chunks: list[Chunk] = []
    try:
        reader = pd.read_csv(
            path, sep=sep, dtype=str, keep_default_na=False, chunksize=TABLE_BATCH_ROWS, encoding="utf-8"
        )
        offset = 0
        for frame in reader:
            chunks.extend(_frame_chunks(path.name, frame, offset))
            offset += len(frame)
    except UnicodeDecodeError:
        raise AssetError(f"{path}: not UTF-8 text", "bad_encoding", "content") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise AssetError(f"{path}: not a readable CSV table ({exc})", "bad_csv", "content") from None
    return chunks


def _parquet_chunks(path: Path) -> list[Chunk]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    chunks: list[Chunk] = []
    try:
        offset = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=TABLE_BATCH_ROWS):
            frame = batch.to_pandas()
            chunks.extend(_frame_chunks(path.name, frame, offset))
            offset += len(frame)
    except (pa.ArrowInvalid, OSError) as exc:
        raise AssetError(f"{path}: not a readable Parquet file ({exc})", "bad_parquet", "content") from None
    return chunks


def _frame_chunks(title: str, frame: Any, offset: int) -> list[Chunk]:
    header = [str(column) for column in frame.columns]
    rows = ((offset + i + 1, values) for i, values in enumerate(frame.itertuples(index=False, name=None)))
    return chunk_rows(title, header, rows)


def parse_sql(url: str, table: str | None, query: str | None) -> ParsedAsset:
    """Rows of a SQL table or query (any SQLAlchemy URL), rendered as table chunks; checksum over the rows."""
    from sqlalchemy import MetaData, Table, create_engine, select
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import SQLAlchemyError

    from strataflow.db.engine import sqlalchemy_url

    if (table is None) == (query is None):
        raise AssetError("a SQL asset needs exactly one of --table or --query", "bad_source", "table")
    driver_url = sqlalchemy_url(url) if url.startswith(("postgres://", "postgresql://")) else url
    shown = make_url(driver_url).render_as_string(hide_password=True)
    uri = f"sql:{shown}#table={table}" if table else f"sql:{shown}#query={content_hash(query or '')[:16]}"
    title = table or "query"
    engine = create_engine(driver_url)
    digest = hashlib.sha256()
    chunks: list[Chunk] = []
    try:
        with engine.connect() as conn:
            if table:
                schema, _, name = table.rpartition(".")
                statement: Any = select(Table(name, MetaData(), schema=schema or None, autoload_with=conn))
            else:
                statement = text(query or "")
            result = conn.execution_options(stream_results=True).execute(statement)
            header = list(result.keys())
            digest.update(json.dumps(header).encode())
            offset = 0
            for part in result.partitions(TABLE_BATCH_ROWS):
                rows = [tuple(row) for row in part]
                digest.update(json.dumps(rows, default=str, ensure_ascii=False).encode())
                chunks.extend(chunk_rows(title, header, ((offset + i + 1, r) for i, r in enumerate(rows))))
                offset += len(rows)
    except SQLAlchemyError as exc:
        raise AssetError(
            f"{uri}: cannot read the SQL source ({exc.__class__.__name__}: {exc})",
            "bad_source",
            "table" if table else "query",
        ) from None
    finally:
        engine.dispose()
    return ParsedAsset(
        uri,
        "sql",
        title,
        digest.hexdigest(),
        chunks,
        {"url": shown, "table": table, "query": query, "rows": offset},
    )
