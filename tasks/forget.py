"""Forget: remove every trace of one data subject (namespace + subject_id), in one transaction.

Removed: L1 (conversation_messages, message_keys: the lineage anchors go too), L2 (memory_items with their
whole history in memory_item_versions), profile_documents, L3 (weekly_reports, insights), quarantine rows
naming the subject (subject_id column, or a raw record with that "subject_id"), the subject's LLM result
cache (llm_cache), embedding_cache rows of the subject's texts that no other scope uses, the subject's
watermarks, and the subject's rows inside Parquet archives written by expiry (files rewritten).

Kept, on purpose:
- llm_calls: the ledger is accounting (tokens, cost, model, hashes; no prompt text). Its rows stay so
  per-run and per-namespace spend remain true, but their subject_id is set to null.
- deletion_reports: the forget report itself stores counts only, and `sha256:<hex>` of namespace + NUL +
  subject_id instead of the id: an auditor who knows the id can confirm it was forgotten; the report alone
  names nobody. Earlier expiry reports hold per-namespace counts only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from pathlib import Path

from sqlalchemy import Connection, text

from models.lifecycle import ForgetResult
from strataflow.config import Settings
from strataflow.db.engine import engine_for
from strataflow.textsearch import content_hash

logger = logging.getLogger(__name__)

SCOPE = "namespace = :namespace and subject_id = :subject_id"

SELECT_SUBJECT_TEXTS = text(
    f"""
    select statement as body from memory_items where {SCOPE} and statement is not null
    union select statement from memory_item_versions where {SCOPE} and statement is not null
    union select summary from weekly_reports where {SCOPE}
    union select statement from insights where {SCOPE}
    """
)
SELECT_MESSAGE_HASHES = text(f"select distinct content_hash from message_keys where {SCOPE}")
# Cache rows whose text another scope (or an asset chunk) still has stay: the cache is keyed by text only.
DELETE_EMBEDDING_CACHE = text(
    """
    delete from embedding_cache as e
    where e.content_hash = any(:hashes)
      and not exists (select 1 from message_keys as k
                      where k.content_hash = e.content_hash
                        and not (k.namespace = :namespace and k.subject_id = :subject_id))
      and not exists (select 1 from memory_items as i
                      where encode(sha256(convert_to(btrim(i.statement), 'UTF8')), 'hex') = e.content_hash
                        and not (i.namespace = :namespace and i.subject_id = :subject_id))
      and not exists (select 1 from asset_chunks as a where a.content_hash = e.content_hash)
    """
)
DELETES = (
    ("conversation_messages", text(f"delete from conversation_messages where {SCOPE}")),
    ("message_keys", text(f"delete from message_keys where {SCOPE}")),
    ("memory_item_versions", text(f"delete from memory_item_versions where {SCOPE}")),
    ("memory_items", text(f"delete from memory_items where {SCOPE}")),
    ("profile_documents", text(f"delete from profile_documents where {SCOPE}")),
    ("weekly_reports", text(f"delete from weekly_reports where {SCOPE}")),
    ("insights", text(f"delete from insights where {SCOPE}")),
    ("llm_cache", text(f"delete from llm_cache where {SCOPE}")),
    ("watermarks", text("delete from watermarks where namespace = :namespace and scope = :subject_id")),
    (
        "quarantine",
        text(
            """
            delete from quarantine
            where (namespace = :namespace or namespace is null)
              and (subject_id = :subject_id or strpos(raw_record, :needle_spaced) > 0
                   or strpos(raw_record, :needle_compact) > 0)
            """
        ),
    ),
)
UNLINK_LLM_CALLS = text(f"update llm_calls set subject_id = null where {SCOPE}")
SELECT_ARCHIVES = text("select distinct archive_path from deletion_reports where archive_path is not null")
INSERT_REPORT = text(
    """
    insert into deletion_reports (run_id, kind, namespace, subject_id, counts)
    values (:run_id, 'forget', :namespace, :subject_hash, cast(:counts as jsonb))
    returning report_id
    """
)


def subject_hash(namespace: str, subject_id: str) -> str:
    """What the forget report stores instead of the subject id."""
    return hashlib.sha256(f"{namespace}\x00{subject_id}".encode()).hexdigest()


def forget_rows(conn: Connection, namespace: str, subject_id: str, run_id: uuid.UUID) -> ForgetResult:
    """Delete the subject's rows from every table (see module docstring); the caller owns the transaction."""
    scope = {"namespace": namespace, "subject_id": subject_id}
    texts = [row.body for row in conn.execute(SELECT_SUBJECT_TEXTS, scope) if row.body]
    hashes = {row.content_hash for row in conn.execute(SELECT_MESSAGE_HASHES, scope)}
    hashes |= {content_hash(body.strip()) for body in texts} | {content_hash(body) for body in texts}
    counts = {
        "embedding_cache": conn.execute(DELETE_EMBEDDING_CACHE, {**scope, "hashes": sorted(hashes)}).rowcount
    }
    quoted = json.dumps(subject_id, ensure_ascii=False)
    params = {**scope, "needle_spaced": f'"subject_id": {quoted}', "needle_compact": f'"subject_id":{quoted}'}
    for table, statement in DELETES:
        counts[table] = conn.execute(statement, params).rowcount
    counts["llm_calls_unlinked"] = conn.execute(UNLINK_LLM_CALLS, scope).rowcount
    counts["archive_rows"] = sum(
        _rewrite_archive(Path(row.archive_path), namespace, subject_id)
        for row in conn.execute(SELECT_ARCHIVES)
    )
    hashed = subject_hash(namespace, subject_id)
    result = ForgetResult(namespace=namespace, subject_hash=hashed, counts=counts)
    report = {"total": {"removed": result.total}, "by_table": counts}
    result.report_id = conn.execute(
        INSERT_REPORT,
        {
            "run_id": run_id,
            "namespace": namespace,
            "subject_hash": f"sha256:{hashed}",
            "counts": json.dumps(report),
        },
    ).scalar_one()
    return result


def _rewrite_archive(path: Path, namespace: str, subject_id: str) -> int:
    """Drop the subject's rows from one Parquet archive (rewritten via a temp file); rows removed."""
    if not path.exists():
        return 0
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    mine = pc.fill_null(
        pc.and_(pc.equal(table["namespace"], namespace), pc.equal(table["subject_id"], subject_id)), False
    )
    removed = pc.sum(pc.cast(mine, "int64")).as_py() or 0
    if removed:
        keep = table.filter(pc.invert(mine))
        tmp = path.with_suffix(".tmp")
        pq.write_table(keep, tmp)
        tmp.replace(path)
    return int(removed)


def forget_subject(
    settings: Settings, namespace: str, subject_id: str, run_id: uuid.UUID | None = None
) -> ForgetResult:
    """Remove every trace of (namespace, subject_id) in one transaction; write a 'forget' report."""
    if not namespace.strip() or not subject_id.strip():
        raise ValueError("forget: namespace and subject id must both be given (non-empty)")
    with engine_for(settings).begin() as conn:
        result = forget_rows(conn, namespace, subject_id, run_id or uuid.uuid4())
    logger.info("forgot subject sha256:%s in %s: %s", result.subject_hash, namespace, result.counts)
    return result
