"""The library calls the HTTP routes and the MCP tools share beyond the entry API: context, profiles (seed
002) and the seed 000 tools, plus the text an LLM tool answers with. One function per call, no SQL.
"""

from __future__ import annotations

import inspect
from typing import Any

from pydantic import BaseModel
from sqlalchemy import Connection

from models.entries import EntryHit
from strataflow.config import Settings
from strataflow.memory import profiles
from strataflow.retrieval.context import ContextResult, build_context

_CONTEXT_PARAMS = set(inspect.signature(build_context).parameters)
DOC_KEYS = {"user": "user_memory", "work": "work_memory"}


class ProfileNotFound(LookupError):
    """The subject has no such profile document."""


def context(
    conn: Connection,
    settings: Settings,
    namespace: str,
    subject_id: str,
    query: str,
    budget: int = 2000,
    fmt: str = "text",
    *,
    intent: str | None = None,
    profile: str = "none",
    agent_id: str | None = None,
) -> ContextResult:
    """build_context with the optional parameters the installed context builder takes."""
    extra = {"intent": intent, "profile": profile, "agent_id": agent_id}
    return build_context(
        conn, settings, namespace, subject_id, query, budget_tokens=budget, fmt=fmt,  # type: ignore[arg-type]
        **{name: value for name, value in extra.items() if name in _CONTEXT_PARAMS},
    )  # fmt: skip


def render_hits(hits: list[EntryHit]) -> str:
    """Entries as seed 003's memory-context lines: `[type] name (id N)` then the content; '' for none."""
    return "\n\n".join(f"[{hit.type}] {hit.name} (id {hit.id})\n{hit.content}" for hit in hits)


def profile_documents(conn: Connection, namespace: str, subject_id: str) -> dict[str, Any]:
    """Seed 002 GET: {"user_memory": {...}, "work_memory": {...}} (an empty document when there is none)."""
    return {
        DOC_KEYS[doc]: _content(profiles.get_profile(conn, namespace, subject_id, doc)) for doc in DOC_KEYS
    }


def profile_document(conn: Connection, namespace: str, subject_id: str, doc_type: str) -> dict[str, Any]:
    """One document: {"content": {...}, "status": ACTIVE|DISABLED, "version": n}."""
    document = profiles.get_profile(conn, namespace, subject_id, doc_type)
    if document is None:
        raise ProfileNotFound(f"subject {subject_id!r} has no {doc_type} profile document")
    return _shaped(document)


def profile_put(
    conn: Connection, namespace: str, subject_id: str, doc_type: str, content: dict[str, Any]
) -> dict[str, Any]:
    """PUT: the document becomes exactly `content` (manual fields, kept out of extraction's reach)."""
    return _shaped(profiles.put_profile(conn, namespace, subject_id, doc_type, content))


def profile_patch(
    conn: Connection, namespace: str, subject_id: str, doc_type: str, content: dict[str, Any]
) -> dict[str, Any]:
    """PATCH: set the given fields (null deletes one), the others stay."""
    return _shaped(profiles.patch_profile(conn, namespace, subject_id, doc_type, content))


def profile_status(
    conn: Connection, namespace: str, subject_id: str, doc_type: str, status: str
) -> dict[str, Any]:
    """ACTIVE or DISABLED (a disabled document is left out of every context)."""
    if not profiles.set_profile_status(conn, namespace, subject_id, doc_type, status.upper()):
        raise ProfileNotFound(f"subject {subject_id!r} has no {doc_type} profile document")
    return profile_document(conn, namespace, subject_id, doc_type)


def save_info(
    conn: Connection,
    settings: Settings,
    namespace: str,
    subject_id: str,
    user_message: str,
    assistant_message: str | None = None,
    existing_info: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Seed 000 save_info: extract from one exchange and save; {extracted_info, saved_count, ...}."""
    save = getattr(profiles, "save_info")  # noqa: B009 (the protocols work gives it this signature)
    result = save(
        conn, settings, namespace, subject_id, user_message, assistant_message=assistant_message,
        existing_info=existing_info,
    )  # fmt: skip
    return _plain(result)


def summarize(conn: Connection, settings: Settings, namespace: str, subject_id: str) -> dict[str, Any]:
    """Seed 000 summarize: the four sections, completeness and the narrative."""
    return _plain(profiles.summarize(conn, namespace, subject_id))


def user_context(
    conn: Connection, settings: Settings, namespace: str, subject_id: str, query: str
) -> dict[str, Any]:
    """Seed 000 get_user_context: {memories, user_profile_summary, total_memories}."""
    get = getattr(profiles, "get_user_context")  # noqa: B009 (the protocols work provides it)
    return _plain(get(conn, settings, namespace, subject_id, query))


def _shaped(document: Any) -> dict[str, Any]:
    return {"content": _content(document), "status": document.status, "version": document.version}


def _content(document: Any) -> dict[str, Any]:
    if document is None:
        return {}
    content = getattr(document, "content", None)
    if content is not None:
        return _plain(content)
    return {
        key: field.get("value") if isinstance(field, dict) else field
        for key, field in document.document.items()
    }


def _plain(value: Any) -> dict[str, Any]:
    return value.model_dump(mode="json") if isinstance(value, BaseModel) else dict(value)
