"""Validate and enrich one chunk of read records into staging rows (pure Python, no database).

Each item becomes exactly one of: a staging row (valid; lang, intent, content_hash, full-text parts and
expires_at added), a quarantine entry (invalid; names the field), or a duplicate of a later item with the
same (namespace, source, source_message_id) in the same chunk (the later one wins).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import orjson
from pydantic import ValidationError

from models.messages import (
    UNSAFE_ID_CHAR,
    MessageRecord,
    canonical_fields,
    describe_errors,
    record_fields,
    validation_context,
)
from strataflow.ingest.fulltext import Lexicon, UnknownWords
from strataflow.ingest.intent import classify_intent
from strataflow.ingest.readers import ReadError, ReadItem
from strataflow.textsearch import CJK_RUN, content_hash, detect_lang, fts_parts

# The "subject_id" member of a line that is not valid JSON: any spacing, a JSON string value.
RAW_SUBJECT = re.compile(r'"subject_id"\s*:\s*("(?:[^"\\]|\\.)*")')
STAGE_COLUMNS = (
    "namespace",
    "source",
    "source_message_id",
    "subject_id",
    "agent_id",
    "conversation_id",
    "role",
    "content",
    "content_hash",
    "lang",
    "intent",
    "event_at",
    "metadata",
    "fts_en",
    "fts_zh",
)
WEEK_SECONDS = 7 * 86400
EPOCH_TO_MONDAY = 3 * 86400  # 1970-01-01 was a Thursday: weeks counted from Monday 1969-12-29


@dataclass(frozen=True)
class ChunkOptions:
    """What a run decides for every record: namespace and source rules, time zone, limits."""

    default_source: str
    tz: ZoneInfo
    max_content_chars: int
    retention_days: int
    namespace: str | None = None  # --namespace: wins over the record's namespace
    source: str | None = None  # --source: wins over the record's source and the file name
    # Online writes only (strataflow.ingest.online): created_at must lie in [start, end], and subject ids may
    # hold no '/' and no control character (models.messages.SAFE_ID); a record that breaks either is
    # quarantined naming the field.
    event_window: tuple[datetime, datetime] | None = None
    safe_subjects: bool = False


@dataclass
class PreparedChunk:
    rows: list[tuple[Any, ...]] = field(default_factory=list)  # in STAGE_COLUMNS order
    payload: str = ""  # rows as COPY text (tab-separated, escaped), rendered off the database thread
    staged: int = 0  # rows in payload (the bulk pipeline drops `rows` once payload is rendered)
    quarantined: list[dict[str, Any]] = field(default_factory=list)
    duplicates: int = 0
    weeks: list[datetime] = field(default_factory=list)  # the UTC ISO weeks (Monday 00:00) the rows fall in
    # With a lexicon: each row's full-text vector as a tsvector literal, or None where the database
    # computes it (fulltext.py); the payload then has an "fts" column after STAGE_COLUMNS.
    vectors: list[str | None] | None = None


def prepare_chunk(
    items: list[ReadItem], options: ChunkOptions, fast: bool = True, lexicon: Lexicon | None = None
) -> PreparedChunk:
    """Validate and enrich a chunk; see the module docstring for where each item goes.

    With `fast` (the default) a record that is already canonical skips pydantic (models.messages.
    canonical_fields decides, with the model's result); every other record, and every record when
    fast=False, is validated by MessageRecord. Both give the same rows and the same quarantine entries.
    With a `lexicon`, the rows' full-text vectors are built here where fulltext.py can (PreparedChunk.vectors;
    the lexicon may ask the database for words it has not seen).
    """
    context = validation_context(options.tz, options.max_content_chars)
    validate = MessageRecord.model_validate
    tz, max_chars = options.tz, options.max_content_chars
    by_key: dict[tuple[str, str, str], tuple[Any, ...]] = {}
    chunk = PreparedChunk()
    for position, raw, value in items:
        if isinstance(value, ReadError):
            chunk.quarantined.append(
                _problem(options, position, raw, None, value.field, value.reason, value.error)
            )
            continue
        fields = canonical_fields(value, tz, max_chars) if fast else None
        if fields is None:
            try:
                fields = record_fields(validate(value, context=context))
            except ValidationError as exc:
                problem = describe_errors(exc)
                chunk.quarantined.append(
                    _problem(options, position, raw, value, problem.field, problem.reason, problem.error)
                )
                continue
        (conversation_id, subject_id, message_id, role, content, event_at) = fields[:6]
        (record_namespace, record_source, agent_id, record_lang, record_metadata) = fields[6:]
        refused = _online_problem(options, subject_id, event_at)
        if refused is not None:
            chunk.quarantined.append(_problem(options, position, raw, value, *refused))
            continue
        namespace = options.namespace or record_namespace
        if namespace is None:
            error = "field 'namespace' is missing: the record has none and no --namespace was given"
            chunk.quarantined.append(
                _problem(options, position, raw, value, "namespace", "missing_namespace", error)
            )
            continue
        metadata = to_json(record_metadata) if record_metadata else "{}"
        if "\\u0000" in metadata:
            error = "field 'metadata': contains a NUL character, which PostgreSQL cannot store"
            chunk.quarantined.append(
                _problem(options, position, raw, value, "metadata", "nul_character", error)
            )
            continue
        source = options.source or record_source or options.default_source
        if not content.isascii() and CJK_RUN.search(content):
            lang = record_lang or detect_lang(content)
            fts_en, fts_zh = fts_parts(content)
        else:  # the common English case, with the same results as detect_lang / fts_parts
            lang, fts_en, fts_zh = record_lang or "en", content, ""
        key = (namespace, source, message_id)
        if key in by_key:
            chunk.duplicates += 1  # the later record wins (in the earlier one's place)
        by_key[key] = (
            namespace,
            source,
            message_id,
            subject_id,
            agent_id or None,
            conversation_id,
            role,
            content,
            content_hash(content),
            lang,
            classify_intent(content),
            event_at,
            metadata,
            fts_en,
            fts_zh,
        )
    chunk.rows = list(by_key.values())
    chunk.staged = len(chunk.rows)
    if chunk.rows:
        if lexicon is not None:
            chunk.vectors = full_text_vectors(chunk.rows, lexicon)
        chunk.payload = render_copy(chunk.rows, chunk.vectors)
        chunk.weeks = utc_weeks(row[11] for row in chunk.rows)
    return chunk


def _online_problem(
    options: ChunkOptions, subject_id: str, event_at: datetime
) -> tuple[str, str, str] | None:
    """(field, reason, error) when an online write's record breaks the write window or the subject rule."""
    if options.safe_subjects and UNSAFE_ID_CHAR.search(subject_id):
        return "subject_id", "invalid_subject", "field 'subject_id': holds '/' or a control character"
    window = options.event_window
    if window is not None and not window[0] <= event_at <= window[1]:
        start, end = (moment.isoformat(timespec="seconds") for moment in window)
        error = (
            f"field 'created_at': {event_at.isoformat(timespec='seconds')} is outside the online write "
            f"window [{start}, {end}] (now minus the retention, now plus STRATAFLOW_API_WRITE_FUTURE_DAYS)"
        )
        return "created_at", "outside_write_window", error
    return None


def full_text_vectors(rows: list[tuple[Any, ...]], lexicon: Lexicon) -> list[str | None]:
    """Each row's vector literal (or None), looking up the chunk's new words in one round trip."""
    vector = lexicon.vector
    vectors: list[str | None] = []
    unknown: list[int] = []
    for index, row in enumerate(rows):
        try:
            vectors.append(vector(row[13], row[14]))
        except UnknownWords:
            vectors.append(None)
            unknown.append(index)
    if unknown:
        lexicon.learn()
        for index in unknown:
            try:
                vectors[index] = vector(rows[index][13], rows[index][14])
            except UnknownWords:  # another pipeline's learn() took the pending words: the database decides
                pass
    return vectors


def utc_weeks(times: Iterable[datetime]) -> list[datetime]:
    """The distinct UTC ISO weeks (their Monday 00:00 UTC) of aware datetimes, in order."""
    weeks = {(int(moment.timestamp()) + EPOCH_TO_MONDAY) // WEEK_SECONDS for moment in times}
    return [datetime.fromtimestamp(week * WEEK_SECONDS - EPOCH_TO_MONDAY, UTC) for week in sorted(weeks)]


def render_copy(rows: list[tuple[Any, ...]], vectors: list[str | None] | None = None) -> str:
    """Rows in COPY text format: tab-separated, backslash escapes, \\N for null, ISO times.

    With vectors, an "fts" column follows STAGE_COLUMNS, and a row with a vector leaves fts_en and fts_zh
    empty (the database does not need them). Rows are joined as they are, and the whole text is checked
    once: when it holds exactly the tabs, newlines and backslashes (one per \\N) that the layout puts
    there, no value needed escaping; otherwise the rows are rendered again with every value escaped.
    """
    payload = _render(rows, vectors, escape=False)
    columns = len(STAGE_COLUMNS) + (vectors is not None)
    nulls = sum(1 for row in rows if row[4] is None) + (vectors.count(None) if vectors is not None else 0)
    if (
        payload.count("\t") == (columns - 1) * len(rows)
        and payload.count("\n") == len(rows)
        and payload.count("\\") == nulls
        and "\r" not in payload
    ):
        return payload
    return _render(rows, vectors, escape=True)


def _render(rows: list[tuple[Any, ...]], vectors: list[str | None] | None, escape: bool) -> str:
    if escape:
        rows = [tuple(_escape(v) if isinstance(v, str) else v for v in row) for row in rows]
    if vectors is None:
        lines = [_line(row, row[4] if row[4] is not None else "\\N") for row in rows]
    else:
        lines = [
            _line(row, row[4] if row[4] is not None else "\\N") + "\t\\N"
            if vector is None
            else _line_with_vector(row, row[4] if row[4] is not None else "\\N", vector)
            for row, vector in zip(rows, vectors, strict=True)
        ]
    lines.append("")
    return "\n".join(lines)


def _line(row: tuple[Any, ...], agent: str) -> str:
    return "\t".join(
        (row[0], row[1], row[2], row[3], agent, row[5], row[6], row[7], row[8], row[9], row[10],
         row[11].isoformat(), row[12], row[13], row[14])
    )  # fmt: skip


def _line_with_vector(row: tuple[Any, ...], agent: str, vector: str) -> str:
    return "\t".join(
        (row[0], row[1], row[2], row[3], agent, row[5], row[6], row[7], row[8], row[9], row[10],
         row[11].isoformat(), row[12], "", "", vector)
    )  # fmt: skip


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def _problem(
    options: ChunkOptions,
    position: int | str,
    raw: bytes | str | None,
    value: dict[str, Any] | None,
    field_name: str | None,
    reason: str,
    error: str,
) -> dict[str, Any]:
    """A quarantine row; the error names the record (source and position) and the field."""
    record = value if isinstance(value, dict) else {}
    source = options.source or _text(record.get("source")) or options.default_source
    namespace = options.namespace or _text(record.get("namespace"))
    if isinstance(raw, bytes):
        raw_text = raw.decode("utf-8", errors="backslashreplace").rstrip("\r\n")
    elif isinstance(raw, str):
        raw_text = raw
    else:
        raw_text = to_json(record)
    # A line that is not JSON at all still names its subject when its "subject_id" member can be read, so
    # forget finds the row by its subject_id column.
    subject = _text(record.get("subject_id")) if record else _subject_in_raw(raw_text)
    return {
        "namespace": namespace,
        "subject_id": subject,
        "source": source,
        "position": str(position),
        "field": field_name,
        "reason": reason,
        "error": f"{source} record {position}: {error}".replace("\x00", "\\x00"),
        "raw_record": raw_text.replace("\x00", "\\u0000"),
    }


def _subject_in_raw(raw_text: str) -> str | None:
    """The "subject_id" string of a malformed JSON line, if it has a readable one."""
    match = RAW_SUBJECT.search(raw_text)
    if match is None:
        return None
    try:
        return _text(json.loads(match.group(1)))
    except ValueError:
        return None


def to_json(value: Any) -> str:
    """JSON text of a parsed record or its metadata (non-JSON values as strings, huge ints included)."""
    try:
        return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:  # orjson refuses integers beyond 64 bits; the standard library does not
        return json.dumps(value, default=str, ensure_ascii=False)


def _text(value: Any) -> str | None:
    """A usable string (for quarantine columns) or None."""
    if (
        isinstance(value, str | int)
        and not isinstance(value, bool)
        and str(value)
        and "\x00" not in str(value)
    ):
        return str(value)[:512]
    return None
