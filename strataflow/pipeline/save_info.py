"""Seed 000 save_info: the extraction stage run on one exchange, now.

The same prompt (extract_prompt: the configured profile), output schema (ExtractionOutput), gateway, ledger
and cache as strataflow/pipeline/extract.py. The assistant's turn goes along as context (marked as such in
the prompt); only items stated in the user's turn are kept. The exchange is not written to L1: its messages
get the ids 1 (user) and 2 (assistant) inside the prompt only, and the saved items carry metadata
{"via": "save_info"} instead of L1 lineage. Seed 000's rules then apply: a field of existing_info with the
same value is skipped; every other item is applied as an extracted item (strataflow/pipeline/apply.py, the
path of extraction and hot memory: an unchanged value is skipped, a newer one wins, a manual one is never
overwritten). The same exchange twice is
answered by the LLM cache and saves nothing the second time.

Given a session opener instead of a connection (the API and MCP do so), the model call holds no database
connection: one short transaction reads the subject's existing keys, the model answers with none held, and
a second transaction saves (a slow model cannot hold the pool other tenants need).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection

from models.common import DEFAULT_IMPORTANCE
from models.llm import ExtractedItem
from models.user_memory import SavedMemory, SaveInfoResult
from models.vocabulary import normalize_key
from strataflow.config import Settings
from strataflow.hashes import content_hash
from strataflow.memory.profiles import refresh_documents
from strataflow.memory.user_memory import SEED_TYPES, memory_content, seed_category
from strataflow.pipeline import extract
from strataflow.pipeline.apply import Lineage, apply_extracted, usable_sources
from strataflow.pipeline.scopes import ScopeMessage
from strataflow.pipeline.stage_loop import stage_gateway
from strataflow.textsearch import detect_lang

Opener = Callable[[], AbstractContextManager[Connection]]


def save_exchange(
    conn: Connection | Opener,
    settings: Settings,
    namespace: str,
    subject_id: str,
    user_message: str,
    assistant_message: str | None = None,
    existing_info: dict[str, Any] | None = None,
) -> SaveInfoResult:
    """Seed 000 save_info: extract the exchange now (the extraction stage's prompt and gateway), then save.
    `conn` is a connection (all in its transaction) or an opener of transactions (module docstring)."""
    if not user_message.strip():
        raise ValueError("save_info: user_message is empty")
    now = datetime.now(UTC)
    batch = _exchange(user_message, assistant_message, now)  # the assistant's turn rides along as context
    session: Opener = (lambda: nullcontext(conn)) if isinstance(conn, Connection) else conn
    with session() as db:
        existing = extract.existing_keys(db, namespace, subject_id)
    gateway = stage_gateway(settings, None)
    prompt = extract.extract_prompt(settings)
    output = gateway.complete(  # with no connection of the caller's held (module docstring)
        extract.STAGE,
        prompt.version,
        prompt.messages(batch, existing),
        prompt.schema_for(batch),
        namespace=namespace,
        subject_id=subject_id,
        cache_key=extract.batch_cache_key(batch),
    )
    known = {normalize_key(k): v for k, v in (existing_info or {}).items()}
    cites = {m.message_id: now for m in batch if m.role in extract.EXTRACT_ROLES}  # the user's turn only
    result = SaveInfoResult(extracted_info={}, saved_count=0, llm_calls=gateway.requests_sent)
    fresh = []
    for item in output.items:
        if not usable_sources(item, cites):
            continue
        if item.key in known and _same(known[item.key], item.value):
            result.skipped_fields.append(item.key)
            result.actions[item.key] = "in_existing_info"
        else:
            fresh.append(item)
            result.extracted_info.setdefault(item.key, item.value)
    lineage = Lineage(None, prompt.version, gateway.model_for(extract.STAGE))
    with session() as db:
        applied = apply_extracted(
            db, namespace, subject_id, fresh, cites, lineage, l1_ids=False, metadata={"via": "save_info"},
            settings=settings,
        )  # fmt: skip
        refresh_documents(db, namespace, subject_id)
    lang = detect_lang(user_message)
    for entry in applied.items:
        result.actions[entry.item.key] = entry.action
        if entry.changed:
            result.saved_memories.append(_saved(entry.item, lang))
        else:
            result.skipped_fields.append(entry.item.key)
    result.saved_count = len(result.saved_memories)
    return result


def _exchange(user_message: str, assistant_message: str | None, now: datetime) -> list[ScopeMessage]:
    turns = [("user", user_message)] + ([("assistant", assistant_message)] if assistant_message else [])
    return [
        ScopeMessage(index, role, body, content_hash(body), now, 0)
        for index, (role, body) in enumerate(turns, start=1)
    ]


def _saved(item: ExtractedItem, lang: str) -> SavedMemory:
    return SavedMemory(
        memoryType=SEED_TYPES.get(item.kind.value, item.kind.value.upper()),
        content=memory_content(item.key, item.value, item.statement, lang, item.approximate),
        field=item.key,
        category=seed_category(item.value),
        importance=item.importance if item.importance is not None else DEFAULT_IMPORTANCE.get(item.kind, 50),
    )


def _same(known: Any, value: Any) -> bool:
    return known == value or str(known).strip() == str(value).strip()
