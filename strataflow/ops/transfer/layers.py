"""Restoring one subject's lines (strataflow.ops.transfer.restore reads the file and owns the transactions):
its state, messages, expired keys, watermarks and the namespace's assets here; its L2 items, insights, L3
reports and profile documents in strataflow.ops.transfer.memory_rows.

Every layer is written by its one writer: L1 messages through the ingest path (prepare_chunk validates each
canonical message as ingest does, write_chunk writes it and quarantines the bad ones), the keys of expired
messages by strataflow.ingest.staging.restore_expired_keys, message embeddings by the embed stage's
write_page, L2 items by strataflow.memory.store.restore_item, insights by strataflow.pipeline.reflect,
weekly reports by strataflow.memory.reports, profile documents by strataflow.memory.profiles, watermarks by
strataflow.pipeline.scopes and assets by strataflow.pipeline.assets.store_asset.

Ids are renumbered: `SubjectState` maps the file's message and item ids onto the new ones as they are
written, and lineage arrays are mapped through it (an id the file does not resolve is dropped and counted).

Nothing the file says about the target is trusted (issue 36): messages pass the online write window (no
partition for a far date); `updated_at`, `created_at`, item versions, report revisions and profile versions
are the target's (now, and numbers counted from 1 in the file's order), never the file's; a row the target
already holds differently is a conflict (kept, reported) unless the import was asked to replace, which writes
the file's content as the target's next version through the layer's own writer (upsert_item, delete_item,
the report archive, the profile row); vectors of the file land only on the rows imported with them (asset
chunks are encoded by the target: nothing from a file enters the shared embedding cache); and a watermark of
the file is merged, never moved past a message of the target that neither the target nor the file covered.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, text

from models.transfer import (
    MESSAGE_FIELDS,
    AssetLine,
    ImportResult,
    MessageKeyLine,
    MessageLine,
)
from strataflow.config import Settings
from strataflow.hashes import content_hash
from strataflow.ingest.asset_readers import ParsedAsset
from strataflow.ingest.chunking import Chunk
from strataflow.ingest.enrich import ChunkOptions, prepare_chunk
from strataflow.ingest.online import write_window
from strataflow.ingest.quarantine import quarantine_row, write_quarantine
from strataflow.ingest.readers import ReadItem
from strataflow.ingest.staging import restore_expired_keys, write_chunk
from strataflow.ops.transfer.jsonl import vector_of
from strataflow.pipeline.assets import store_asset
from strataflow.pipeline.embed import TARGETS, write_page
from strataflow.pipeline.scopes import advance_watermark

_KEYS = "unnest(cast(:sources as text[]), cast(:ids as text[])) as wanted (source, source_message_id)"
SELECT_MESSAGE_IDS = text(
    f"""
    select k.source, k.source_message_id, k.message_id, m.event_at, m.ingest_seq, m.embedding is null as bare
    from {_KEYS}
    join message_keys as k on k.namespace = :namespace and k.source = wanted.source
        and k.source_message_id = wanted.source_message_id
    left join conversation_messages as m on m.message_id = k.message_id and m.event_at = k.event_at
    """
)
SELECT_WATERMARK = text(
    "select position from watermarks where stage = :stage and namespace = :namespace and scope = :scope"
)
SELECT_KNOWN_HASHES = text(
    f"""
    select k.source, k.source_message_id, k.content_hash
    from {_KEYS}
    join message_keys as k on k.namespace = :namespace and k.source = wanted.source
        and k.source_message_id = wanted.source_message_id
    """
)
# The first message of the subject past the watermark that the file's watermark did not cover: the merged
# watermark stops before it, so the target's own unextracted messages are still extracted.
SELECT_FIRST_UNCOVERED = text(
    """
    select min(ingest_seq) from conversation_messages
    where namespace = :namespace and subject_id = :scope and ingest_seq > :before
        and message_id <> all(cast(:covered as bigint[]))
    """
)
SELECT_ASSET_CHECKSUM = text(
    "select checksum from asset_documents where namespace = :namespace and uri = :uri"
)
SHOWN_CONFLICTS = 20
MESSAGES = next(target for target in TARGETS if target.table == "conversation_messages")


@dataclass
class SubjectState:
    """One subject's import: where its rows go, and the file's ids mapped to the new ones."""

    settings: Settings
    namespace: str
    subject_id: str | None
    run_id: uuid.UUID | None
    label: str  # the quarantine source of the file's bad lines, import:<file name>
    result: ImportResult
    replace: bool = False  # a conflict takes the file's content as a new version (otherwise it is kept)
    now: datetime = field(default_factory=lambda: datetime.now(UTC))  # the target's time of every row
    messages: dict[int, int] = field(default_factory=dict)
    items: dict[int, int] = field(default_factory=dict)
    marks: dict[str, int] = field(default_factory=dict)  # the file's watermark positions (source ingest_seq)
    reached: dict[str, int] = field(default_factory=dict)  # the new ingest_seq they cover
    covered: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))  # new ids they cover

    def ids(self, old: list[int], mapping: dict[int, int] | None = None) -> list[int]:
        """The new ids of old ones (sorted, distinct); ids the file did not resolve are dropped, counted."""
        mapping = self.messages if mapping is None else mapping
        new = {mapping[i] for i in old if i in mapping}
        self.result.lineage_dropped += sum(1 for i in old if i not in mapping)
        return sorted(new)

    def vector(self, line: Any) -> tuple[Any, str | None]:
        """(vector, model) of a line's embedding when it fits the target's size; (None, None) otherwise."""
        vector = vector_of(line.embedding, self.settings.embedding_dim)
        if line.embedding is not None and vector is None:
            self.result.embeddings_dropped += 1
        return (vector, line.embedding.model) if vector is not None else (None, None)

    def count(self, layer: str, action: str) -> None:
        counts = self.result.layer(layer)
        setattr(counts, action, getattr(counts, action) + 1)

    def conflict(self, layer: str, what: str, why: str = "the target holds it differently") -> None:
        """A row the target holds differently: kept as it is, counted and reported."""
        self.count(layer, "kept")
        if len(self.result.conflicts) < SHOWN_CONFLICTS:
            hint = "" if self.replace else "; --replace writes the file's as a new version"
            self.result.conflicts.append(
                f"{self.label} subject {self.subject_id!r} {what}: {why}, kept{hint}"
            )


def restore_keys(conn: Connection, state: SubjectState, lines: list[MessageKeyLine]) -> None:
    """Keys of expired messages: added unless the namespace has them; their new ids join the map."""
    if not lines:
        return
    rows = [line.model_dump() for line in lines]
    added = restore_expired_keys(conn, state.namespace, rows)
    counts = state.result.layer("message_keys")
    counts.read += len(lines)
    counts.new += added
    counts.unchanged += len(lines) - added
    found = _message_ids(conn, state, [(line.source, line.source_message_id) for line in lines])
    for line in lines:
        new = found.get((line.source, line.source_message_id))
        if new is not None:
            state.messages[line.message_id] = new[0]


def restore_messages(
    conn: Connection, state: SubjectState, lines: list[tuple[int, bytes, dict[str, Any], MessageLine]]
) -> list[dict[str, Any]]:
    """One batch of L1 messages through the ingest path; returns the quarantine rows of its bad records
    (already written). Their new ids join the map, watermarks learn how far they reach, and stored
    embeddings land on the rows that have none."""
    settings = state.settings
    options = ChunkOptions(
        default_source=state.label,
        tz=settings.tz,
        max_content_chars=settings.max_content_chars,
        retention_days=settings.retention_days,
        namespace=state.namespace,
        event_window=write_window(settings, state.now),
        safe_subjects=True,
    )
    lines = _without_conflicts(conn, state, lines)
    records: list[ReadItem] = [
        (number, raw, {k: value[k] for k in MESSAGE_FIELDS if k in value}) for number, raw, value, _ in lines
    ]
    chunk = prepare_chunk(records, options)
    for problem in chunk.quarantined:
        relabel(problem, state.label)
    written = write_chunk(conn, chunk, len(records), state.run_id, settings.retention_days)
    counts = state.result.layer("messages")
    counts.read += len(lines)
    counts.new += written.inserted
    counts.updated += written.updated
    counts.unchanged += written.skipped
    counts.quarantined += written.quarantined
    bad = {int(problem["position"]) for problem in chunk.quarantined}
    good = [(value, line) for number, _, value, line in lines if number not in bad]
    keys = [(str(value.get("source") or state.label), str(value["source_message_id"])) for value, _ in good]
    found = _message_ids(conn, state, keys)
    rows: list[dict[str, Any]] = []
    found_vectors: list[Any] = []
    models: list[str] = []
    for key, (value, line) in zip(keys, good, strict=True):
        if key not in found:
            continue
        message_id, event_at, seq, bare = found[key]
        state.messages[line.message_id] = message_id
        for stage, position in state.marks.items():
            if line.ingest_seq <= position and seq is not None:
                state.reached[stage] = max(state.reached.get(stage, 0), seq)
                state.covered[stage].add(message_id)
        vector, model = state.vector(line)
        if bare and vector is not None and model is not None:
            row = {
                "message_id": message_id,
                "event_at": event_at,
                "content_hash": content_hash(value["content"]),
            }
            rows.append(row)
            found_vectors.append(vector)
            models.append(model)
    if rows:
        write_page(conn, MESSAGES, rows, found_vectors, models, {})
    return chunk.quarantined


def _without_conflicts(
    conn: Connection, state: SubjectState, lines: list[tuple[int, bytes, dict[str, Any], MessageLine]]
) -> list[tuple[int, bytes, dict[str, Any], MessageLine]]:
    """The lines whose message the target lacks or holds with the same content (or every line, with replace):
    a message the target holds with other content is a conflict, never rewritten silently."""
    if state.replace:
        return lines
    keys = [
        (str(value.get("source") or state.label), str(value.get("source_message_id")))
        for _, _, value, _ in lines
    ]
    params = {"namespace": state.namespace, "sources": [k[0] for k in keys], "ids": [k[1] for k in keys]}
    known = {
        (row.source, row.source_message_id): row.content_hash
        for row in conn.execute(SELECT_KNOWN_HASHES, params)
    }
    kept = []
    for key, entry in zip(keys, lines, strict=True):
        content = entry[2].get("content")
        have = known.get(key)
        if have is not None and isinstance(content, str) and have != content_hash(content):
            state.conflict(
                "messages", f"message {key[1]!r} of source {key[0]!r}", "the target holds other text"
            )
        else:
            kept.append(entry)
    return kept


def coverage(state: SubjectState, line: MessageLine) -> tuple[bool, ...]:
    """Which of the subject's watermarks cover a message: a batch of messages shares one answer, so the new
    ingest order keeps every covered message before every uncovered one."""
    return tuple(line.ingest_seq <= position for _, position in sorted(state.marks.items()))


def restore_watermarks(conn: Connection, state: SubjectState) -> None:
    """Each stage's watermark merged: at the newest new message its file watermark covered, but never past a
    message of the subject that neither the target's watermark nor the file's covered (the target's own
    unextracted messages stay pending), and never moved back."""
    for stage, reached in state.reached.items():
        params = {"stage": stage, "namespace": state.namespace, "scope": state.subject_id}
        before = conn.execute(SELECT_WATERMARK, params).scalar()
        gap = conn.execute(
            SELECT_FIRST_UNCOVERED, {**params, "before": before or 0, "covered": sorted(state.covered[stage])}
        ).scalar()
        position = reached if gap is None else min(reached, gap - 1)
        if position <= (before or 0):
            state.count("watermarks", "unchanged")
            continue
        advance_watermark(
            conn, stage, state.namespace, str(state.subject_id), state.run_id, position=position
        )
        state.count("watermarks", "new" if before is None else "updated")


def restore_asset_line(conn: Connection, state: SubjectState, line: AssetLine) -> None:
    """An asset of the namespace by its one writer, which encodes its chunks itself: a file's vectors never
    enter the embedding cache that every namespace reads (a crafted one would be another tenant's vector of
    the same text). An asset the target holds with another checksum is a conflict unless replace."""
    have = conn.execute(SELECT_ASSET_CHECKSUM, {"namespace": state.namespace, "uri": line.uri}).scalar()
    if have is not None and have != line.checksum and not state.replace:
        state.conflict("assets", f"asset {line.uri!r}", "the target holds another version")
        return
    asset = ParsedAsset(
        uri=line.uri,
        kind=line.kind,
        title=line.title or "",
        checksum=line.checksum,
        chunks=[Chunk(c.content, c.token_count, dict(c.metadata)) for c in line.chunks],
        metadata=dict(line.metadata),
    )
    action, counts = store_asset(conn, state.settings, state.namespace, asset, state.run_id)
    state.count("assets", {"inserted": "new", "replaced": "updated"}.get(action, "unchanged"))
    chunks = state.result.layer("asset_chunks")
    chunks.read += len(line.chunks)
    chunks.new += counts.chunks_written


def relabel(problem: dict[str, Any], label: str) -> dict[str, Any]:
    """A quarantine row of the ingest path named after the export file and its line (its position)."""
    prefix = f"{problem['source']} record {problem['position']}: "
    error = problem["error"][len(prefix) :] if problem["error"].startswith(prefix) else problem["error"]
    problem.update(source=label, error=f"{label} line {problem['position']}: {error}")
    return problem


def problem_row(
    label: str,
    namespace: str,
    position: int,
    subject: Any,
    field: str | None,
    reason: str,
    error: str,
    raw: str,
) -> dict[str, Any]:
    """A quarantine row of a bad line or record of an import (the one row builder, quarantine_row); `error`
    already names the place (e.g. `import:f.jsonl line 7: field 'kind': ...`)."""
    return quarantine_row(
        namespace=namespace, source=label, position=position, field=field, reason=reason, error=error,
        raw_record=raw, subject_id=subject if isinstance(subject, str) and "\x00" not in subject else None,
    )  # fmt: skip


def quarantine(
    conn: Connection, settings: Settings, run_id: uuid.UUID | None, problems: list[dict[str, Any]]
) -> None:
    """Write quarantine rows through the one quarantine writer (strataflow.ingest.quarantine)."""
    write_quarantine(conn, run_id, problems)


def _message_ids(
    conn: Connection, state: SubjectState, keys: list[tuple[str, str]]
) -> dict[tuple[str, str], tuple[int, Any, int | None, bool]]:
    """(source, source_message_id) -> (new message_id, event_at, ingest_seq, embedding is null)."""
    if not keys:
        return {}
    params = {"namespace": state.namespace, "sources": [k[0] for k in keys], "ids": [k[1] for k in keys]}
    return {
        (row.source, row.source_message_id): (row.message_id, row.event_at, row.ingest_seq, bool(row.bare))
        for row in conn.execute(SELECT_MESSAGE_IDS, params)
    }
