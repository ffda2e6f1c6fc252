"""Quarantine: the one writer of quarantine rows, for every input that can refuse a record (a batch ingest's
chunk, an online write, an asset file or a bad record of one).

A row says where the record was read (namespace, source and position: a line, row or turn number, or "file"
for a whole asset), the field the error names, a short machine-readable reason, the sentence a person reads,
the subject when the record names one (so `strataflow forget` finds the row by its subject_id column) and the
record's text. PostgreSQL text cannot hold a NUL character: the error writes it as \\x00 and the record as
\\u0000 (its JSON spelling). A record is quarantined once (sql/283: one row per namespace, source, position
and record text), so a re-run of a killed ingest, or of a bad asset file, adds no second row. The caller owns
the transaction, so a chunk's bad records commit with its rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, text

INSERT_QUARANTINE = text(
    """
    insert into quarantine (run_id, namespace, subject_id, source, position, field, reason, error, raw_record)
    values (:run_id, :namespace, :subject_id, :source, :position, :field, :reason, :error, :raw_record)
    on conflict ((coalesce(namespace, '')), source, position, (md5(raw_record))) do nothing
    """
)


def quarantine_row(
    *,
    namespace: str | None,
    source: str,
    position: int | str,
    field: str | None,
    reason: str,
    error: str,
    raw_record: str,
    subject_id: str | None = None,
) -> dict[str, Any]:
    """One quarantine row (without its run): what write_quarantine writes."""
    return {
        "namespace": namespace,
        "subject_id": subject_id,
        "source": source,
        "position": str(position),
        "field": field,
        "reason": reason,
        "error": error.replace("\x00", "\\x00"),
        "raw_record": raw_record.replace("\x00", "\\u0000"),
    }


def write_quarantine(conn: Connection, run_id: uuid.UUID | None, rows: Sequence[dict[str, Any]]) -> None:
    """Write quarantine rows (built by quarantine_row) for the run; a record already quarantined is left."""
    if rows:
        conn.execute(INSERT_QUARANTINE, [{"run_id": run_id, **row} for row in rows])
