"""Assets: data assets (Markdown/text, CSV/Parquet, JSON/JSONL, SQL tables) into long-term memory.

Each asset is one `asset_documents` row (namespace, uri, kind, checksum, version) and its `asset_chunks`
(content, hash, token estimate, language, full-text vector, embedding through the embedding cache, and,
for a chunk whose own model is not the multilingual one, its multilingual vector: embedding_multi, sql/401,
encoded before the asset's transaction when the asset is new or changed: strataflow.pipeline.embed_multi).
Chunking is in strataflow/ingest/chunking.py. An asset whose checksum is unchanged is skipped without being
parsed or encoded; a changed one replaces all its chunks in one transaction (version + 1) and leaves an
`asset_replace` row in deletion_reports. A file that cannot be read or parsed (bad UTF-8, bad JSON, an
unknown extension, a bad JSONL line) goes to quarantine and the other assets continue.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sqlalchemy import Connection, Engine, text

from models.results import AssetResult
from strataflow.config import Settings
from strataflow.db.engine import engine_for
from strataflow.hashes import content_hash, file_checksum
from strataflow.ingest.asset_readers import (
    AssetError,
    ParsedAsset,
    asset_files,
    parse_file,
    parse_sql,
)
from strataflow.ingest.chunking import Chunk
from strataflow.ingest.quarantine import quarantine_row, write_quarantine
from strataflow.llm.embeddings import embed_texts_counted, model_for_text
from strataflow.memory.item_embedding import multi_model
from strataflow.pipeline.deletion_reports import write_deletion_report
from strataflow.pipeline.embed_multi import multi_vectors
from strataflow.textsearch import TSVECTOR_SQL, detect_lang, fts_parts

logger = logging.getLogger(__name__)

RAW_RECORD_CHARS = 2_000

SELECT_DOCUMENT = text(
    """
    select document_id, checksum, version from asset_documents
    where namespace = :namespace and uri = :uri
    """
)
LOCK_DOCUMENT = text(
    """
    select document_id, checksum, version from asset_documents
    where namespace = :namespace and uri = :uri for update
    """
)
INSERT_DOCUMENT = text(
    """
    insert into asset_documents (namespace, uri, kind, title, checksum, metadata, run_id)
    values (:namespace, :uri, :kind, :title, :checksum, cast(:metadata as jsonb), :run_id)
    returning document_id
    """
)
UPDATE_DOCUMENT = text(
    """
    update asset_documents
    set kind = :kind, title = :title, checksum = :checksum, version = version + 1,
        metadata = cast(:metadata as jsonb), run_id = :run_id, updated_at = now()
    where document_id = :document_id
    returning version
    """
)
DELETE_CHUNKS = text("delete from asset_chunks where document_id = :document_id")
INSERT_CHUNK = text(
    f"""
    insert into asset_chunks (document_id, namespace, chunk_index, content, content_hash, token_count, lang,
                              embedding, embedding_model, embedding_multi, embedding_multi_model, fts,
                              metadata)
    values (:document_id, :namespace, :chunk_index, :content, :content_hash, :token_count, :lang,
            :embedding, :embedding_model, cast(:embedding_multi as vector),
            cast(:embedding_multi_model as text), {TSVECTOR_SQL.format(en=":fts_en", zh=":fts_zh")},
            cast(:metadata as jsonb))
    """
)


def store_asset(
    conn: Connection,
    settings: Settings,
    namespace: str,
    asset: ParsedAsset,
    run_id: uuid.UUID | None,
    multis: Sequence[np.ndarray | None] | None = None,
) -> tuple[str, AssetResult]:
    """Insert, replace or skip one asset inside the caller's transaction; returns (action, counts).
    `multis`: its chunks' multilingual vectors (`chunk_multi_vectors`), encoded ahead by the caller; encoded
    here when not given."""
    counts = AssetResult(assets=1)
    params = {"namespace": namespace, "uri": asset.uri}
    current = conn.execute(LOCK_DOCUMENT, params).first()
    if current is not None and current.checksum == asset.checksum:
        counts.unchanged = 1
        return "unchanged", counts
    document = {
        "kind": asset.kind,
        "title": asset.title,
        "checksum": asset.checksum,
        "metadata": json.dumps(asset.metadata, default=str),
        "run_id": run_id,
    }
    if current is None:
        document_id = conn.execute(INSERT_DOCUMENT, {**params, **document}).scalar_one()
        counts.inserted, action = 1, "inserted"
    else:
        document_id = current.document_id
        counts.chunks_deleted = conn.execute(DELETE_CHUNKS, {"document_id": document_id}).rowcount
        version = conn.execute(UPDATE_DOCUMENT, {**document, "document_id": document_id}).scalar_one()
        report = {
            "uri": asset.uri,
            "document_id": document_id,
            "version": version,
            "chunks_deleted": counts.chunks_deleted,
            "chunks_inserted": len(asset.chunks),
        }
        reason = f"checksum changed: {asset.uri}"
        write_deletion_report(conn, run_id, "asset_replace", report, namespace=namespace, reason=reason)
        counts.replaced, action = 1, "replaced"
    if multis is None:
        multis = chunk_multi_vectors(settings, asset.chunks)
    _insert_chunks(conn, settings, namespace, document_id, asset.chunks, counts, multis)
    return action, counts


def chunk_multi_vectors(settings: Settings, chunks: Sequence[Chunk]) -> list[np.ndarray | None]:
    """The chunks' multilingual vectors (None for a chunk whose own model is multilingual)."""
    texts = [chunk.content for chunk in chunks]
    return multi_vectors(settings, texts, [model_for_text(settings, t) for t in texts])


def _insert_chunks(
    conn: Connection,
    settings: Settings,
    namespace: str,
    document_id: int,
    chunks: Sequence[Chunk],
    counts: AssetResult,
    multis: Sequence[np.ndarray | None],
) -> None:
    if not chunks:
        return
    vectors, hits = embed_texts_counted(conn, settings, [chunk.content for chunk in chunks])
    multi = multi_model(settings)
    rows = []
    for index, (chunk, vector, multi_vector) in enumerate(zip(chunks, vectors, multis, strict=True)):
        fts_en, fts_zh = fts_parts(chunk.content)
        rows.append(
            {
                "document_id": document_id,
                "namespace": namespace,
                "chunk_index": index,
                "content": chunk.content,
                "content_hash": content_hash(chunk.content),
                "token_count": chunk.token_count,
                "lang": detect_lang(chunk.content),
                "embedding": vector,
                "embedding_model": model_for_text(settings, chunk.content),
                "embedding_multi": multi_vector,
                "embedding_multi_model": None if multi_vector is None else multi,
                "fts_en": fts_en,
                "fts_zh": fts_zh,
                "metadata": json.dumps(chunk.metadata, ensure_ascii=False),
            }
        )
    conn.execute(INSERT_CHUNK, rows)
    counts.chunks_written += len(rows)
    counts.encoded += len(rows) - hits + sum(v is not None for v in multis)
    counts.cache_hits += hits


def quarantine_asset(
    conn: Connection, namespace: str, source: str, error: AssetError, raw: str, run_id: uuid.UUID | None
) -> None:
    row = quarantine_row(
        namespace=namespace,
        source=source,
        position=error.position,
        field=error.field,
        reason=error.reason,
        error=str(error),
        raw_record=raw[:RAW_RECORD_CHARS],
    )
    write_quarantine(conn, run_id, [row])


def _raw_text(path: Path) -> str:
    try:
        with path.open("rb") as handle:
            return handle.read(RAW_RECORD_CHARS * 4).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _add(total: AssetResult, part: AssetResult) -> None:
    for name in AssetResult.model_fields:
        setattr(total, name, getattr(total, name) + getattr(part, name))


def ingest_assets(
    settings: Settings,
    paths: Sequence[str | Path],
    namespace: str,
    run_id: uuid.UUID | None = None,
    url: str | None = None,
    table: str | None = None,
    query: str | None = None,
) -> AssetResult:
    """Ingest asset files (and, with url, one SQL table or query); one transaction per asset."""
    engine = engine_for(settings)
    result = AssetResult()
    for path in asset_files(paths):
        source = path.resolve().as_uri()
        try:
            checksum = file_checksum(path)
            with engine.connect() as conn:
                known = conn.execute(SELECT_DOCUMENT, {"namespace": namespace, "uri": source}).first()
            if known is not None and known.checksum == checksum:
                result.assets += 1
                result.unchanged += 1
                continue
            asset = parse_file(path, checksum)
        except (AssetError, OSError) as exc:
            error = (
                exc
                if isinstance(exc, AssetError)
                else AssetError(f"{path}: cannot read the file ({exc})", "unreadable", "path")
            )
            with engine.begin() as conn:
                quarantine_asset(conn, namespace, source, error, _raw_text(path), run_id)
            result.assets += 1
            result.quarantined += 1
            continue
        _store(engine, settings, namespace, asset, run_id, result)
    if url is not None:
        try:
            asset = parse_sql(url, table, query)
        except AssetError as exc:
            with engine.begin() as conn:
                quarantine_asset(
                    conn, namespace, f"sql:{table or 'query'}", exc, query or table or "", run_id
                )
            result.assets += 1
            result.quarantined += 1
        else:
            _store(engine, settings, namespace, asset, run_id, result)
    return result


def _store(
    engine: Engine,
    settings: Settings,
    namespace: str,
    asset: ParsedAsset,
    run_id: uuid.UUID | None,
    result: AssetResult,
) -> None:
    with engine.connect() as conn:  # a new or changed asset: its multilingual vectors before the transaction
        known = conn.execute(SELECT_DOCUMENT, {"namespace": namespace, "uri": asset.uri}).first()
    unchanged = known is not None and known.checksum == asset.checksum
    ahead = None if unchanged else chunk_multi_vectors(settings, asset.chunks)
    with engine.begin() as conn:
        action, counts = store_asset(conn, settings, namespace, asset, run_id, ahead)
        if action != "unchanged":
            for error in asset.bad_records:
                quarantine_asset(
                    conn, namespace, asset.uri, error, asset.raw_lines.get(error.position, ""), run_id
                )
            counts.quarantined += len(asset.bad_records)
    logger.info("asset %s: %s (%d chunks)", asset.uri, action, counts.chunks_written)
    _add(result, counts)
