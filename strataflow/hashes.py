"""Hashes, in one place (the bottom layer: every package may use them).

- content_hash(text): sha256 hex of the UTF-8 text, the identity of a text (message and chunk versions, the
  embedding cache, SQL migration and view checksums, short names derived from a text). content_hash_sql(expr)
  is the same hash computed by PostgreSQL, for a text the database holds.
- subject_hash(namespace, subject_id): sha256 hex of namespace NUL subject_id, how a data subject is named
  where its id must not be kept (forget reports, run errors and logs through pipeline.runs.scope_ref).
- file_checksum(path): sha256 hex of a file's bytes (ingest watermarks, asset versions).
"""

from __future__ import annotations

import hashlib
from pathlib import Path


def content_hash(text: str) -> str:
    """sha256 of the text: the identity of a content version (dedup, caches, re-extraction)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def content_hash_sql(expression: str) -> str:
    """content_hash computed in SQL: the hex sha256 of a text expression's UTF-8 bytes."""
    return f"encode(sha256(convert_to({expression}, 'UTF8')), 'hex')"


def subject_hash(namespace: str, subject_id: str) -> str:
    """sha256 of namespace NUL subject_id: what stands for a subject id that must not be stored."""
    return hashlib.sha256(f"{namespace}\x00{subject_id}".encode()).hexdigest()


def file_checksum(path: Path) -> str:
    """The file's sha256 (hex). Hashing releases the GIL, so other threads run meanwhile."""
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
