"""`strataflow export`: every layer of one namespace (or one subject) as one versioned JSONL file.

The whole export reads one snapshot (a repeatable-read, read-only transaction), so the header's counts are
the lines that follow. Per subject, in the order an import needs them: the keys of expired messages, the
subject's extract watermark, its L1 messages (ingest order), L2 items with their versions (item order; the
internal hot summary stays out: the target's hot-memory stage rebuilds it), insights,
weekly reports with their earlier revisions, and both profile documents; then, for a whole namespace, its
data assets with their chunks. Embeddings go along as stored (null stays null), so the target ranks exactly
as the source did without encoding anything.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, text

from models.transfer import FORMAT, FORMAT_VERSION, LINE_LAYERS, WATERMARK_STAGES, ExportResult
from strataflow import __version__
from strataflow.config import Settings
from strataflow.db.engine import engine_for
from strataflow.ops.transfer.jsonl import dumps, embedding_of, written_file
from strataflow.pipeline.progress import progress_bar
from strataflow.pipeline.scopes import EARLIEST, week_inputs

SCOPE = "namespace = :namespace and (cast(:subject_id as text) is null or subject_id = :subject_id)"
PUBLIC = "kind <> 'hot_summary'"  # models.transfer.INTERNAL_KINDS: not exported, refused by an import
COUNTS = {
    "message_keys": f"select count(*) from message_keys where {SCOPE} and expired_at is not null",
    "messages": f"select count(*) from conversation_messages where {SCOPE}",
    "items": f"select count(*) from memory_items where {SCOPE} and {PUBLIC}",
    "item_versions": f"select count(*) from memory_item_versions where {SCOPE} and {PUBLIC}",
    "entries": f"select count(*) from memory_items where {SCOPE} and entry_type is not null",
    "insights": f"select count(*) from insights where {SCOPE}",
    "reports": f"select count(*) from weekly_reports where {SCOPE}",
    "report_revisions": f"select count(*) from weekly_report_revisions where {SCOPE}",
    "profiles": f"select count(*) from profile_documents where {SCOPE}",
    "watermarks": (
        "select count(*) from watermarks where namespace = :namespace and stage = any(:stages) "
        "and (cast(:subject_id as text) is null or scope = :subject_id)"
    ),
    "assets": "select count(*) from asset_documents where namespace = :namespace and :whole",
    "asset_chunks": "select count(*) from asset_chunks where namespace = :namespace and :whole",
}
SELECT_SUBJECTS = text(
    f"""
    select subject_id from message_keys where {SCOPE}
    union select subject_id from memory_items where {SCOPE}
    union select subject_id from weekly_reports where {SCOPE}
    union select subject_id from insights where {SCOPE}
    union select subject_id from profile_documents where {SCOPE}
    order by 1
    """
)
ONE = "namespace = :namespace and subject_id = :subject_id"
SELECT_EXPIRED_KEYS = text(
    f"""
    select message_id, subject_id, source, source_message_id, conversation_id, event_at, content_hash,
        first_ingested_at, expired_at
    from message_keys where {ONE} and expired_at is not null order by message_id
    """
)
SELECT_WATERMARKS = text(
    """
    select scope as subject_id, stage, position from watermarks
    where namespace = :namespace and scope = :subject_id and stage = any(:stages) and position is not null
    order by stage
    """
)
SELECT_MESSAGES = text(
    f"""
    select message_id, ingest_seq, conversation_id, subject_id, source_message_id, role, content,
        event_at as created_at, source, agent_id, lang, metadata, embedding, embedding_model
    from conversation_messages where {ONE} order by ingest_seq
    """
)
SELECT_ITEMS = text(
    f"""
    select item_id, subject_id, agent_id, kind, key, value, statement, category, importance, confidence,
        status, source, version, valid_from, recorded_at, updated_at, created_at, reflected_version,
        source_message_ids, metadata, run_id, prompt_version, model, name, description, entry_type, is_shared,
        confirmed_model, confirmed_prompt_version, confirmed_run_id, confirmed_at, embedding, embedding_model
    from memory_items where {ONE} and {PUBLIC} order by item_id
    """
)
SELECT_VERSIONS = text(
    """
    select item_id, version, action, kind, key, value, statement, category, importance, confidence, status,
        source, valid_from, valid_to, recorded_at, superseded_at, source_message_ids, run_id, prompt_version,
        model, note, agent_id, name, description, entry_type, is_shared
    from memory_item_versions where namespace = :namespace and item_id = any(:ids) order by version_id
    """
)
SELECT_INSIGHTS = text(
    f"""
    select insight_id, subject_id, key, question, statement, confidence, evidence_item_ids,
        evidence_message_ids, valid_from, valid_to, recorded_at, superseded_at, run_id, prompt_version, model,
        embedding, embedding_model
    from insights where {ONE} order by insight_id
    """
)
SELECT_REPORTS = text(
    f"""
    select report_id, subject_id, week_start, week_end, summary, key_events, metrics, input_hash,
        source_message_ids, run_id, prompt_version, model, created_at, updated_at, revision, embedding,
        embedding_model
    from weekly_reports where {ONE} order by week_start
    """
)
SELECT_REVISIONS = text(
    f"""
    select report_id, revision, summary, key_events, metrics, input_hash, source_message_ids, run_id,
        prompt_version, model, written_at, superseded_at
    from weekly_report_revisions where {ONE} order by report_id, revision
    """
)
SELECT_PROFILES = text(
    f"""
    select subject_id, doc_type, document, manual, status, version, created_at, updated_at
    from profile_documents where {ONE} order by doc_type
    """
)
SELECT_ASSETS = text(
    """
    select document_id, uri, kind, title, checksum, version, metadata, ingested_at, updated_at
    from asset_documents where namespace = :namespace order by document_id
    """
)
SELECT_CHUNKS = text(
    """
    select chunk_index, content, content_hash, token_count, lang, metadata, embedding, embedding_model
    from asset_chunks where document_id = :document_id order by chunk_index
    """
)
ITEM_BATCH = 500
STREAM = {"stream_results": True, "yield_per": 1000}


def export_namespace(
    settings: Settings,
    namespace: str,
    out: Path,
    subject_id: str | None = None,
    progress: bool = True,
) -> ExportResult:
    """Write namespace (or one of its subjects; assets belong to the namespace and go only with a whole
    namespace) to `out`, replacing it when complete."""
    engine = engine_for(settings)
    params = {
        "namespace": namespace,
        "subject_id": subject_id,
        "stages": list(WATERMARK_STAGES),
        "whole": subject_id is None,
    }
    with engine.connect() as conn:
        conn = conn.execution_options(isolation_level="REPEATABLE READ", postgresql_readonly=True)
        with conn.begin():
            counts = {name: conn.execute(text(sql), params).scalar_one() for name, sql in COUNTS.items()}
            header = {
                "type": "header",
                "format": FORMAT,
                "version": FORMAT_VERSION,
                "exported_at": datetime.now(UTC),
                "source": {
                    "namespace": namespace,
                    "subject_id": subject_id,
                    "strataflow": __version__,
                    "embedding_model": settings.embedding_model,
                    "timezone": settings.timezone,
                },
                "counts": counts,
            }
            lines = sum(counts[name] for name in LINE_LAYERS)
            with written_file(out) as stream, progress_bar("exporting", lines, progress) as advance:
                stream.write(dumps(header))
                for line in _lines(conn, settings, params):
                    stream.write(dumps(line))
                    advance(1)
    return ExportResult(
        namespace=namespace, subject_id=subject_id, path=str(out), counts=counts, bytes=out.stat().st_size
    )


def _lines(conn: Connection, settings: Settings, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
    hashes = _week_hashes(conn, settings, params["namespace"])
    for subject_id in conn.execute(SELECT_SUBJECTS, params).scalars().all():
        one = {**params, "subject_id": subject_id}
        yield from _rows(conn, SELECT_EXPIRED_KEYS, one, "message_key")
        yield from _rows(conn, SELECT_WATERMARKS, one, "watermark")
        yield from _rows(conn, SELECT_MESSAGES, one, "message", _with_embedding)
        yield from _items(conn, one)
        yield from _rows(conn, SELECT_INSIGHTS, one, "insight", _with_embedding)
        yield from _reports(conn, one, hashes)
        yield from _rows(conn, SELECT_PROFILES, one, "profile")
    if params["whole"]:
        for asset in _rows(conn, SELECT_ASSETS, params, "asset"):
            chunks = conn.execute(SELECT_CHUNKS, {"document_id": asset["document_id"]}).mappings()
            yield {**asset, "chunks": [_with_embedding(dict(chunk)) for chunk in chunks]}


def _rows(
    conn: Connection,
    query: Any,
    params: dict[str, Any],
    kind: str,
    shape: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> Iterator[dict[str, Any]]:
    for row in conn.execution_options(**STREAM).execute(query, params).mappings():
        line = {"type": kind, **row}
        yield shape(line) if shape is not None else line


def _with_embedding(row: dict[str, Any]) -> dict[str, Any]:
    row["embedding"] = embedding_of(row.get("embedding"), row.pop("embedding_model", None))
    return row


def _items(conn: Connection, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Item lines, each with its versions (read ITEM_BATCH items at a time)."""
    batch: list[dict[str, Any]] = []
    for item in _rows(conn, SELECT_ITEMS, params, "item", _with_embedding):
        batch.append(item)
        if len(batch) == ITEM_BATCH:
            yield from _with_versions(conn, params["namespace"], batch)
            batch = []
    yield from _with_versions(conn, params["namespace"], batch)


def _with_versions(conn: Connection, namespace: str, items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    if not items:
        return
    versions: dict[int, list[dict[str, Any]]] = {item["item_id"]: [] for item in items}
    query = {"namespace": namespace, "ids": list(versions)}
    for version in conn.execute(SELECT_VERSIONS, query).mappings():
        row = dict(version)
        versions[row.pop("item_id")].append(row)
    for item in items:
        yield {**item, "versions": versions[item["item_id"]]}


def _reports(
    conn: Connection, params: dict[str, Any], hashes: dict[tuple[str, Any], str]
) -> Iterator[dict[str, Any]]:
    revisions: dict[int, list[dict[str, Any]]] = {}
    for revision in conn.execute(SELECT_REVISIONS, params).mappings():
        row = dict(revision)
        revisions.setdefault(row.pop("report_id"), []).append(row)
    for report in _rows(conn, SELECT_REPORTS, params, "report", _with_embedding):
        current = hashes.get((report["subject_id"], report["week_start"])) == report["input_hash"]
        yield {**report, "current": current, "revisions": revisions.get(report["report_id"], [])}


def _week_hashes(conn: Connection, settings: Settings, namespace: str) -> dict[tuple[str, Any], str]:
    """The input hash of every scope-week of the namespace now (rollup's), to mark current reports."""
    until = datetime.now(UTC) + timedelta(days=3660)
    rows = week_inputs(conn, settings.timezone, namespace, EARLIEST, until, all_scopes=True)
    return {(row.subject_id, row.week_start): row.input_hash for row in rows}
