"""The ingest's preparation as it was before the fast path (commit fcef757), kept as the reference.

Every record goes through MessageRecord (pydantic), and rows are rendered one by one. Only the equality
test (test_ingest_paths.py) uses it: the bulk pipeline must write exactly what this writes. The only
change from the original is `staged`, which write_chunk now reads.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from models.messages import MessageRecord, RecordProblem, describe_errors, validation_context
from strataflow.hashes import content_hash
from strataflow.ingest.enrich import ChunkOptions, PreparedChunk, _problem, to_json
from strataflow.ingest.intent import classify_intent
from strataflow.ingest.readers import ReadItem
from strataflow.textsearch import CJK_RUN, detect_lang, fts_parts


def legacy_prepare_chunk(items: list[ReadItem], options: ChunkOptions) -> PreparedChunk:
    context = validation_context(options.tz, options.max_content_chars)
    validate = MessageRecord.model_validate
    by_key: dict[tuple[str, str, str], tuple[Any, ...]] = {}
    chunk = PreparedChunk()
    for position, raw, value in items:
        if isinstance(value, RecordProblem):
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
        else:
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
    chunk.staged = len(chunk.rows)
    if chunk.rows:
        chunk.payload = legacy_render_copy(chunk.rows)
    return chunk


def legacy_render_copy(rows: list[tuple[Any, ...]]) -> str:
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
