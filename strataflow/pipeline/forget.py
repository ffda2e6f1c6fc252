"""Forget: remove every trace of one data subject (namespace + subject_id), in one transaction.

Removed: L1 (conversation_messages, message_keys: the lineage anchors go too), L2 (memory_items with their
whole history in memory_item_versions), profile_documents, L3 (weekly_reports, insights), quarantine rows
naming the subject (the subject_id stored at quarantine time, or a raw record whose "subject_id" is the
subject however its JSON is spaced, malformed lines included), the subject's LLM result cache (llm_cache),
embedding_cache rows of the subject's texts that no other scope uses, the subject's watermarks, the
subject's requests in provider batches (llm_batches.requests: their identity and the message lines their
answer is checked against), and the subject's rows inside Parquet archives written by expiry (files
rewritten).

Batches: the subject's requests are scrubbed first, which waits for a collect of the same batch that is
under way (strataflow.llm.batch.collect holds its batch's row while it writes answers) and makes a later
collect skip them: an answer the provider returns after the forget is never written back to llm_cache or
llm_calls; the rows of a collect that finished before are deleted or unlinked with the rest.

Kept, on purpose, and scrubbed:
- llm_calls: the ledger is accounting (tokens, cost, model, hashes; no prompt text). Its rows stay so
  per-run and per-namespace spend remain true, but their subject_id is set to null and their error text
  (a model's validation errors, which once carried its output) is cleared, as is any error of the namespace
  that names the subject.
- pipeline_runs: a run's counts, parameters or error that name the subject (an error list of an older
  version, say) get "[forgotten]" in its place.
- deletion_reports: the forget report itself stores counts only, and `sha256:<hex>` of namespace + NUL +
  subject_id instead of the id: an auditor who knows the id can confirm it was forgotten; the report alone
  names nobody. Earlier expiry reports hold per-namespace counts only.

Not reached, and said so in the report (`not_reached`): the PostgreSQL server log (a statement logged by
log_statement or a slow-query log may hold the subject's text), the WAL and base backups (old row images
until they are recycled or expire), Prefect's own database (flow-run states and logs: strataflow names
scopes there by hash, and a provider's error text never reaches them, strataflow.llm.gateway.provider_error)
logs written outside the database (the API's access log shows route paths without their query and without
a subject named in a path), and the LLM provider's copies (the requests sent, and a batch's uploaded input
and output files, which the provider keeps until they are deleted with its files API). Operators rotate and
expire those (docs/security.md, "What a forget cannot reach").

The subject is matched in free text as a whole id: not inside a longer id (u1 does not match u10).
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, text

from models.lifecycle import ForgetResult
from strataflow.config import Settings
from strataflow.db.engine import engine_for
from strataflow.hashes import subject_hash
from strataflow.pipeline.deletion_reports import write_deletion_report
from strataflow.pipeline.embed import embedded_hash_sql, embedding_cache_prune

logger = logging.getLogger(__name__)

SCOPE = "namespace = :namespace and subject_id = :subject_id"
# What forget cannot scrub (module docstring); the deletion report lists it.
NOT_REACHED = (
    "the PostgreSQL server log (statements and errors it logged)",
    "dead row versions in table and index files (until VACUUM reclaims them)",
    "the WAL and base backups (old row images until recycled or expired)",
    "Prefect's database (flow-run states and logs; scopes are named there by hash)",
    "log files outside the database (the API's access log records paths, never query strings)",
    "the LLM provider's copies (requests sent; a batch's uploaded input and output files)",
)
# The subject's requests in provider batches: removed from each batch's identities (the row lock waits for a
# collect of that batch under way, and a later collect skips what is gone).
SCRUB_LLM_BATCHES = text(
    """
    update llm_batches as b
    set requests = (
        select coalesce(jsonb_object_agg(r.key, r.value), '{}'::jsonb) from jsonb_each(b.requests) as r
        where not (r.value->>'namespace' = :namespace and r.value->>'subject_id' = :subject_id)
    )
    where exists (
        select 1 from jsonb_each(b.requests) as r
        where r.value->>'namespace' = :namespace and r.value->>'subject_id' = :subject_id
    )
    """
)

# The embedded texts of every row of the subject (earlier item versions and report revisions included): their
# cache rows go, unless another scope's row (or an asset chunk) has the same text.
SUBJECT_TEXT_HASHES = " union ".join(
    f"select {embedded_hash_sql(table)} from {table} where {SCOPE}"
    for table in (
        "message_keys",
        "memory_items",
        "memory_item_versions",
        "weekly_reports",
        "weekly_report_revisions",
        "insights",
    )
)
DELETE_EMBEDDING_CACHE = embedding_cache_prune(
    SUBJECT_TEXT_HASHES,
    going={
        table: "r.namespace = :namespace and r.subject_id = :subject_id"
        for table in ("conversation_messages", "memory_items", "weekly_reports", "insights")
    },
)
DELETES = (
    ("conversation_messages", text(f"delete from conversation_messages where {SCOPE}")),
    ("message_keys", text(f"delete from message_keys where {SCOPE}")),
    ("memory_item_versions", text(f"delete from memory_item_versions where {SCOPE}")),
    ("memory_items", text(f"delete from memory_items where {SCOPE}")),
    ("profile_documents", text(f"delete from profile_documents where {SCOPE}")),
    ("weekly_report_revisions", text(f"delete from weekly_report_revisions where {SCOPE}")),
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
              and (subject_id = :subject_id or raw_record ~ :raw_subject_pattern)
            """
        ),
    ),
)
CLEAR_LLM_CALL_ERRORS = text(
    """
    update llm_calls set error = null
    where error is not null
      and ((namespace = :namespace and subject_id = :subject_id)
           or ((namespace = :namespace or namespace is null) and error ~ :subject_pattern))
    """
)
UNLINK_LLM_CALLS = text(f"update llm_calls set subject_id = null where {SCOPE}")
SELECT_RUNS_NAMING = text(
    """
    select run_id, parameters, counts, error from pipeline_runs
    where (namespace = :namespace or namespace is null)
      and (parameters::text ~ :subject_pattern or counts::text ~ :subject_pattern
           or error ~ :subject_pattern)
    """
)
UPDATE_RUN = text(
    """
    update pipeline_runs
    set parameters = cast(:parameters as jsonb), counts = cast(:counts as jsonb), error = :error
    where run_id = :run_id
    """
)
FORGOTTEN = "[forgotten]"
# Characters that continue an id: the subject matches only where none of them touches it.
ID_CHARS = "[:alnum:]_-"
SELECT_ARCHIVES = text("select distinct archive_path from deletion_reports where archive_path is not null")


def forget_rows(conn: Connection, namespace: str, subject_id: str, run_id: uuid.UUID) -> ForgetResult:
    """Delete the subject's rows from every table (see module docstring); the caller owns the transaction."""
    scope = {"namespace": namespace, "subject_id": subject_id}
    counts = {"llm_batches": conn.execute(SCRUB_LLM_BATCHES, scope).rowcount}  # first: see module docstring
    counts["embedding_cache"] = conn.execute(DELETE_EMBEDDING_CACHE, scope).rowcount
    params = {
        **scope,
        "raw_subject_pattern": raw_subject_pattern(subject_id),
        "subject_pattern": subject_pattern(subject_id),
    }
    for table, statement in DELETES:
        counts[table] = conn.execute(statement, params).rowcount
    counts["llm_calls_errors_cleared"] = conn.execute(CLEAR_LLM_CALL_ERRORS, params).rowcount
    counts["llm_calls_unlinked"] = conn.execute(UNLINK_LLM_CALLS, scope).rowcount
    counts["pipeline_runs_scrubbed"] = _scrub_runs(conn, params, subject_id)
    counts["archive_rows"] = sum(
        _rewrite_archive(Path(row.archive_path), namespace, subject_id)
        for row in conn.execute(SELECT_ARCHIVES)
    )
    result = ForgetResult(
        namespace=namespace, subject_hash=subject_hash(namespace, subject_id), counts=counts
    )
    report = {"total": {"removed": result.total}, "by_table": counts, "not_reached": list(NOT_REACHED)}
    result.report_id = write_deletion_report(
        conn, run_id, "forget", report, namespace=namespace, subject_id=subject_id
    )
    return result


def subject_pattern(subject_id: str) -> str:
    """A PostgreSQL regular expression matching subject_id as a whole id in free text or JSON text."""
    return f"(^|[^{ID_CHARS}]){_are_escape(subject_id)}($|[^{ID_CHARS}])"


def raw_subject_pattern(subject_id: str) -> str:
    """A PostgreSQL regular expression for a raw record's "subject_id" member with this value, whatever the
    spacing around the colon, in either JSON spelling of the value (escaped non-ASCII or not)."""
    spellings = dict.fromkeys((json.dumps(subject_id, ensure_ascii=False), json.dumps(subject_id)))
    return '"subject_id"\\s*:\\s*(' + "|".join(_are_escape(s) for s in spellings) + ")"


def _are_escape(value: str) -> str:
    """value as a literal inside a PostgreSQL (ARE) regular expression: every non-alphanumeric escaped."""
    return "".join(ch if ch.isalnum() else "\\" + ch for ch in value)


def _scrub_runs(conn: Connection, params: dict[str, Any], subject_id: str) -> int:
    """Replace the subject in pipeline_runs parameters, counts and error text; the number of runs changed."""
    pattern = re.compile(rf"(?<![\w-]){re.escape(subject_id)}(?![\w-])")
    changed = 0
    for run in conn.execute(SELECT_RUNS_NAMING, params).all():
        parameters, counts = _scrub(run.parameters, pattern), _scrub(run.counts, pattern)
        error = None if run.error is None else pattern.sub(FORGOTTEN, run.error)
        if (parameters, counts, error) != (run.parameters, run.counts, run.error):
            row = {"run_id": run.run_id, "parameters": json.dumps(parameters), "counts": json.dumps(counts)}
            conn.execute(UPDATE_RUN, {**row, "error": error})
            changed += 1
    return changed


def _scrub(value: Any, pattern: re.Pattern[str]) -> Any:
    """A JSON value with the subject replaced in every string and key."""
    if isinstance(value, str):
        return pattern.sub(FORGOTTEN, value)
    if isinstance(value, list):
        return [_scrub(item, pattern) for item in value]
    if isinstance(value, dict):
        return {pattern.sub(FORGOTTEN, key): _scrub(item, pattern) for key, item in value.items()}
    return value


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
