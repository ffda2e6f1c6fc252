"""Validate and enrich one chunk of read records into staging rows (pure Python, no database).

Each item becomes exactly one of: a staging row (valid; lang, intent, content_hash, full-text parts and
expires_at added), a quarantine entry (invalid; names the field), or a duplicate of a later item with the
same (namespace, source, source_message_id) in the same chunk (the later one wins).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

import orjson
from pydantic import ValidationError

from models.messages import MessageRecord, describe_errors, validation_context
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


@dataclass(frozen=True)
class ChunkOptions:
    """What a run decides for every record: namespace and source rules, time zone, limits."""

    default_source: str
    tz: ZoneInfo
    max_content_chars: int
    retention_days: int
    namespace: str | None = None  # --namespace: wins over the record's namespace
    source: str | None = None  # --source: wins over the record's source and the file name


@dataclass
class PreparedChunk:
    rows: list[tuple[Any, ...]] = field(default_factory=list)  # in STAGE_COLUMNS order
    payload: str = ""  # rows as COPY text (tab-separated, escaped), rendered off the database thread
    quarantined: list[dict[str, Any]] = field(default_factory=list)
    duplicates: int = 0


def prepare_chunk(items: list[ReadItem], options: ChunkOptions) -> PreparedChunk:
    """Validate and enrich a chunk; see the module docstring for where each item goes."""
    context = validation_context(options.tz, options.max_content_chars)
    validate = MessageRecord.model_validate
    by_key: dict[tuple[str, str, str], tuple[Any, ...]] = {}
    chunk = PreparedChunk()
    for position, raw, value in items:
        if isinstance(value, ReadError):
            chunk.quarantined.append(
                _problem(options, position, raw, None, value.field, value.reason, value.error)
            )
            continue
        try:
            record = validate(value, context=context)
        except ValidationError as exc:
            problem = describe_errors(exc)
            chunk.quarantined.append(
                _problem(options, position, raw, value, problem.field, problem.reason, problem.error)
            )
            continue
        namespace = options.namespace or record.namespace
        if namespace is None:
            error = "field 'namespace' is missing: the record has none and no --namespace was given"
            chunk.quarantined.append(
                _problem(options, position, raw, value, "namespace", "missing_namespace", error)
            )
            continue
        metadata = to_json(record.metadata) if record.metadata else "{}"
        if "\\u0000" in metadata:
            error = "field 'metadata': contains a NUL character, which PostgreSQL cannot store"
            chunk.quarantined.append(
                _problem(options, position, raw, value, "metadata", "nul_character", error)
            )
            continue
        source = options.source or record.source or options.default_source
        content = record.content
        if CJK_RUN.search(content):
            lang = record.lang or detect_lang(content)
            fts_en, fts_zh = fts_parts(content)
        else:  # the common English case, with the same results as detect_lang / fts_parts
            lang, fts_en, fts_zh = record.lang or "en", content, ""
        event_at = record.created_at
        key = (namespace, source, record.source_message_id)
        if key in by_key:
            chunk.duplicates += 1
        by_key[key] = (
            namespace,
            source,
            record.source_message_id,
            record.subject_id,
            record.agent_id or None,
            record.conversation_id,
            record.role,
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
    if chunk.rows:
        chunk.payload = render_copy(chunk.rows)
    return chunk


def render_copy(rows: list[tuple[Any, ...]]) -> str:
    """Rows in COPY text format: tab-separated, backslash escapes, \\N for a null agent_id, ISO times."""
    lines = []
    for row in rows:
        texts = list(row)
        agent = texts[4]
        texts[4] = agent or ""
        texts[11] = row[11].isoformat()
        joined = "".join(texts)
        if "\\" in joined or "\t" in joined or "\n" in joined or "\r" in joined:
            texts = [_escape(value) for value in texts]
        if agent is None:
            texts[4] = "\\N"
        lines.append("\t".join(texts))
    lines.append("")
    return "\n".join(lines)


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
