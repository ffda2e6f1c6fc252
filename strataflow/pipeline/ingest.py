"""Ingest: conversation logs (files or a SQL query) into L1, idempotently, bad records to quarantine.

Records stream in chunks of settings.ingest_chunk_rows: strataflow/ingest/readers.py reads them,
strataflow/ingest/enrich.py validates and enriches them (bad ones to quarantine),
strataflow/ingest/staging.py writes them (COPY + set-based upsert; changed content re-queued; expired messages
never resurrected). A file whose checksum matches its watermark (stage 'ingest', scope = the file path) is
skipped whole; a
SQL source keeps the largest updated_at it has seen.
"""

import logging
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, text

from models.results import IngestResult
from strataflow.config import Settings
from strataflow.db.engine import engine_for
from strataflow.hashes import content_hash, file_checksum
from strataflow.ingest.enrich import ChunkOptions
from strataflow.ingest.pipeline import ingest_chunks
from strataflow.ingest.readers import (
    ReaderError,
    ReadItem,
    detect_format,
    expand_paths,
    read_chunks,
    read_sql_chunks,
)
from strataflow.pipeline.progress import progress_bar
from strataflow.pipeline.runs import record_run
from strataflow.pipeline.scopes import advance_watermark

logger = logging.getLogger(__name__)

STAGE = "ingest"
SELECT_WATERMARK = text(
    f"select checksum, value from watermarks where stage = '{STAGE}' "
    "and namespace = :namespace and scope = :scope"
)


def ingest_logs(
    settings: Settings,
    paths: list[str] | list[Path],
    namespace: str | None = None,
    fmt: str = "auto",
    source: str | None = None,
    mapping: dict[str, str] | None = None,
    run_id: uuid.UUID | None = None,
    progress: bool = True,
    sql_url: str | None = None,
    sql_query: str | None = None,
) -> IngestResult:
    """Ingest log files (or, with fmt='sql', the rows of sql_query at sql_url) into L1.

    Records its own pipeline_runs row ('ingest') unless a run_id is given by the caller.
    """
    engine = engine_for(settings)
    if run_id is None:
        parameters = {
            "paths": [str(p) for p in paths],
            "namespace": namespace,
            "format": fmt,
            "source": source,
        }
        return record_run(
            engine,
            "ingest",
            parameters,
            namespace,
            lambda own_id: ingest_logs(
                settings, paths, namespace, fmt, source, mapping, own_id, progress, sql_url, sql_query
            ),
        )
    result = IngestResult(run_id=run_id)
    with progress_bar("ingest", None, progress) as bar, engine.connect() as conn:
        if fmt == "sql":
            _ingest_sql(conn, settings, namespace, source, mapping, sql_url, sql_query, result, bar)
        else:
            for path in expand_paths([str(p) for p in paths]):
                _ingest_file(conn, settings, path, namespace, fmt, source, mapping, result, bar)
    return result


def _ingest_file(
    conn: Connection,
    settings: Settings,
    path: Path,
    namespace: str | None,
    fmt: str,
    source: str | None,
    mapping: dict[str, str] | None,
    result: IngestResult,
    bar: Any,
) -> None:
    file_format = detect_format(path) if fmt == "auto" else fmt
    scope, watermark_namespace = str(path), namespace or "*"
    result.files += 1
    with conn.begin():
        row = conn.execute(SELECT_WATERMARK, {"namespace": watermark_namespace, "scope": scope}).one_or_none()
    # A file ingested before is hashed first (unchanged: skipped). A new one is hashed beside the ingest, for
    # its watermark: the hash releases the GIL, and would otherwise hold up the start (0.14 s for 200k rows).
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ingest-checksum") as hashing:
        checksum = hashing.submit(file_checksum, path)
        if row is not None and row.checksum == checksum.result() and row.value.get("source") == source:
            result.files_skipped += 1
            logger.info("%s: unchanged since the last ingest, skipped", path)
            return
        options = ChunkOptions(
            default_source=path.name,
            tz=settings.tz,
            max_content_chars=settings.max_content_chars,
            retention_days=settings.retention_days,
            namespace=namespace,
            source=source,
        )
        chunks = read_chunks(path, file_format, settings.ingest_chunk_rows, settings.tz, mapping)
        counts = ingest_chunks(conn.engine, chunks, options, result.run_id, bar)
    result.add(counts)
    value = {"source": source, "format": file_format, "rows": counts.read}
    with conn.begin():
        advance_watermark(
            conn, STAGE, watermark_namespace, scope, result.run_id, checksum=checksum.result(), value=value
        )


def _ingest_sql(
    conn: Connection,
    settings: Settings,
    namespace: str | None,
    source: str | None,
    mapping: dict[str, str] | None,
    url: str | None,
    query: str | None,
    result: IngestResult,
    bar: Any,
) -> None:
    if not url or not query:
        raise ReaderError("the sql format needs --url (a SQLAlchemy URL) and --query (a select statement)")
    name = source or "sql:" + content_hash(f"{url}\n{query}")[:12]
    scope, watermark_namespace = f"sql:{name}", namespace or "*"
    with conn.begin():
        row = conn.execute(SELECT_WATERMARK, {"namespace": watermark_namespace, "scope": scope}).one_or_none()
    since = row.value.get("updated_at") if row is not None else None
    options = ChunkOptions(
        default_source=name,
        tz=settings.tz,
        max_content_chars=settings.max_content_chars,
        retention_days=settings.retention_days,
        namespace=namespace,
        source=source,
    )
    seen: list[Any] = [since]

    def track(chunks: Iterator[list[ReadItem]]) -> Iterator[list[ReadItem]]:
        for chunk in chunks:
            for _position, _raw, value in chunk:
                if isinstance(value, dict) and value.get("updated_at") is not None:
                    stamp = value["updated_at"]
                    stamp = stamp.isoformat() if hasattr(stamp, "isoformat") else str(stamp)
                    seen[0] = stamp if seen[0] is None or stamp > seen[0] else seen[0]
            yield chunk

    chunks = read_sql_chunks(url, query, settings.ingest_chunk_rows, mapping, since=since)
    result.files += 1
    result.add(ingest_chunks(conn.engine, track(chunks), options, result.run_id, bar))
    with conn.begin():
        value = {"source": name, "updated_at": seen[0]}
        advance_watermark(conn, STAGE, watermark_namespace, scope, result.run_id, value=value)
