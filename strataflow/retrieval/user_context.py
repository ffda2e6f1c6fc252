"""Seed 000 load_context (get_user_context): the subject's memories for a query, ranked by the one ranking
(strataflow.retrieval.item_search.subject_memories: what the query points at by key or kind, then the
retrieval ranking, then importance), with the seed 000 profile summary once enough of the profile is known.
Only the items the agent may see (the one visibility rule); an item saved a second ago is found through its
words."""

from __future__ import annotations

from sqlalchemy import Connection

from models.user_memory import ContextMemory, UserContext
from strataflow.config import Settings
from strataflow.memory.user_memory import (
    SEED_TYPES,
    SUMMARY_MIN_FIELDS,
    memory_content,
    seed_category,
    summarize,
)
from strataflow.retrieval.item_search import subject_memories
from strataflow.retrieval.query_intent import key_hints


def get_user_context(
    conn: Connection,
    settings: Settings,
    namespace: str,
    subject_id: str,
    query: str,
    *,
    limit: int = 20,
    agent_id: str | None = None,
) -> UserContext:
    """Seed 000 load_context: the subject's memories ranked for query, then by importance."""
    hint_keys, hint_kinds = key_hints(query)
    found, total = subject_memories(
        conn, settings, namespace, subject_id, query, agent_id=agent_id, limit=limit, hint_keys=hint_keys,
        hint_kinds=hint_kinds,
    )  # fmt: skip
    summary = summarize(conn, namespace, subject_id)
    lang = summary.language
    memories = [
        ContextMemory(
            id=item.id,
            type=SEED_TYPES.get(item.kind, item.kind.upper()),
            content=memory_content(
                item.key, item.value, item.statement, lang, bool(item.metadata.get("approximate"))
            ),
            importance=item.importance,
            category=seed_category(item.value),
            createdAt=item.valid_from.date().isoformat(),
            field=item.key,
        )  # fmt: skip
        for item in found
    ]
    known = len(summary.completeness.filled_fields) >= SUMMARY_MIN_FIELDS
    return UserContext(
        memories=memories,
        user_profile_summary=summary.narrative_summary if known else None,
        total_memories=total,
    )
