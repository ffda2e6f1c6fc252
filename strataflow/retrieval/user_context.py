"""Seed 000 load_context (get_user_context): the subject's memories ranked by relevance to a query, then
importance, with the seed 000 profile summary once enough of the profile is known."""

from __future__ import annotations

from sqlalchemy import Connection, text

from models.user_memory import ContextMemory, UserContext
from strataflow.config import Settings
from strataflow.memory.user_memory import (
    SEED_TYPES,
    SUMMARY_MIN_FIELDS,
    memory_content,
    seed_category,
    summarize,
)
from strataflow.retrieval.query_intent import key_hints
from strataflow.textsearch import TSQUERY_SQL, or_query_parts

SELECT_CONTEXT_MEMORIES = text(
    f"""
    with q as (select {TSQUERY_SQL.format(en=":q_en", zh=":q_zh")} as tsq)
    select mi.item_id, mi.kind, mi.key, mi.value, mi.statement, mi.importance, mi.valid_from, mi.metadata,
        count(*) over () as total
    from memory_items as mi cross join q
    where mi.namespace = :namespace and mi.subject_id = :subject_id and mi.status = 'active'
        and mi.kind <> 'hot_summary'
        and (mi.agent_id is null or mi.is_shared or mi.agent_id = cast(:agent_id as text))
    order by coalesce(ts_rank(mi.fts, q.tsq), 0)
            + 0.5 * (mi.key = any(:hint_keys) or mi.kind = any(:hint_kinds))::int desc,
        mi.importance desc, mi.valid_from desc, mi.item_id
    limit :limit
    """
)


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
    """Seed 000 load_context: the subject's memories ranked by relevance to query, then importance."""
    del settings  # full text and key hints only: no embedding, so a memory saved a second ago is found
    q_en, q_zh = or_query_parts(query)
    hint_keys, hint_kinds = key_hints(query)
    params = {
        "namespace": namespace, "subject_id": subject_id, "agent_id": agent_id, "q_en": q_en, "q_zh": q_zh,
        "hint_keys": hint_keys, "hint_kinds": hint_kinds, "limit": limit,
    }  # fmt: skip
    rows = list(conn.execute(SELECT_CONTEXT_MEMORIES, params))
    summary = summarize(conn, namespace, subject_id)
    lang = summary.language
    memories = [
        ContextMemory(
            id=row.item_id,
            type=SEED_TYPES.get(row.kind, row.kind.upper()),
            content=memory_content(
                row.key, row.value, row.statement, lang, bool((row.metadata or {}).get("approximate"))
            ),
            importance=row.importance,
            category=seed_category(row.value),
            createdAt=row.valid_from.date().isoformat(),
            field=row.key,
        )  # fmt: skip
        for row in rows
    ]
    known = len(summary.completeness.filled_fields) >= SUMMARY_MIN_FIELDS
    return UserContext(
        memories=memories,
        user_profile_summary=summary.narrative_summary if known else None,
        total_memories=int(rows[0].total) if rows else 0,
    )
