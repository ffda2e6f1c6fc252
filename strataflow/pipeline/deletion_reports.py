"""Deletion reports: the one writer of deletion_reports, a row for every run that deletes (or, dry, would
delete) rows: expiry ('expire'), `strataflow forget` ('forget') and an asset whose file changed
('asset_replace'). The caller owns the transaction, so the report commits with the deletion it describes.

A report never keeps the id of a forgotten subject: given one, it stores `sha256:` + strataflow.hashes.
subject_hash(namespace, subject_id), the hash `strataflow forget` prints and run records use.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Connection, text

from strataflow.hashes import subject_hash

DeletionKind = Literal["expire", "forget", "asset_replace"]

INSERT_REPORT = text(
    """
    insert into deletion_reports (run_id, kind, namespace, subject_id, dry_run, forced, reason, counts,
                                  partitions_dropped, oldest_event_at, newest_event_at, archive_path)
    values (:run_id, :kind, :namespace, :subject, :dry_run, :forced, :reason, cast(:counts as jsonb),
            :partitions_dropped, :oldest_event_at, :newest_event_at, :archive_path)
    returning report_id
    """
)


def write_deletion_report(
    conn: Connection,
    run_id: uuid.UUID | None,
    kind: DeletionKind,
    counts: Mapping[str, Any],
    *,
    namespace: str | None = None,
    subject_id: str | None = None,
    dry_run: bool = False,
    forced: bool = False,
    reason: str | None = None,
    partitions_dropped: Sequence[str] = (),
    oldest_event_at: datetime | None = None,
    newest_event_at: datetime | None = None,
    archive_path: str | None = None,
) -> int:
    """Write one deletion report (counts as the stage reports them); its report_id. A subject_id needs its
    namespace and is stored hashed."""
    if subject_id is not None and namespace is None:
        raise ValueError("a deletion report names a subject only within its namespace")
    subject = None if subject_id is None else f"sha256:{subject_hash(namespace or '', subject_id)}"
    params = {
        "run_id": run_id,
        "kind": kind,
        "namespace": namespace,
        "subject": subject,
        "dry_run": dry_run,
        "forced": forced,
        "reason": reason,
        "counts": json.dumps(counts),
        "partitions_dropped": list(partitions_dropped),
        "oldest_event_at": oldest_event_at,
        "newest_event_at": newest_event_at,
        "archive_path": archive_path,
    }
    return int(conn.execute(INSERT_REPORT, params).scalar_one())
