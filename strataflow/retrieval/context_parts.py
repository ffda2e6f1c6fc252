"""Parts of the context builder (strataflow.retrieval.context) that follow the seeds: the intents (seed 001's
task types), the profile documents (seed 002 markers), the choice of weekly reports by similarity (seed 001
searchWeeklyReports) and the agent scope of items (seed 003).

Intents: an explicit intent is one of seed 001's task types or one of ours; otherwise the query is classified
(strataflow.retrieval.query_intent: recap, fact, other).

| intent given          | used     | sections in value order (after the profiles; hot memory always first) |
|-----------------------|----------|------------------------------------------------------------------------|
| QA_QUERY, qa          | qa       | hot, 2 weekly reports by similarity, retrieval (L1 too), L2, insights  |
| QC_TASK, task         | task     | hot, L2 with status and decision first, today, more L2, retrieval      |
| PROTOCOL_QA, protocol | protocol | hot, retrieval over assets (the knowledge base), L2 references, L2     |
| GENERAL, other        | other    | hot, key L2, today, retrieval, insights, the most similar report       |
| recap, fact           | as named | see strataflow.retrieval.context                                       |
"""

from __future__ import annotations

from concurrent.futures import Future
from datetime import datetime
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field
from sqlalchemy import Connection, text

from strataflow.config import Settings
from strataflow.memory.api import visible_to_agent
from strataflow.retrieval.query_intent import classify_intent
from strataflow.textsearch import TSQUERY_SQL

ContextIntent = Literal["recap", "fact", "other", "qa", "task", "protocol"]

SEED_INTENTS: dict[str, ContextIntent] = {
    "QA_QUERY": "qa",
    "QC_TASK": "task",
    "PROTOCOL_QA": "protocol",
    "GENERAL": "other",
    "GENERAL_CHAT": "other",
}
INTENTS: tuple[str, ...] = ("recap", "fact", "other", "qa", "task", "protocol")
PROFILE_DOCS: dict[str, tuple[str, ...]] = {
    "user": ("user",),
    "work": ("work",),
    "both": ("user", "work"),
    "none": (),
}
INTENT_HINT_KINDS: dict[str, tuple[str, ...]] = {"task": ("status", "decision"), "protocol": ("reference",)}
REPORT_LIMITS: dict[str, int] = {"recap": 4, "qa": 2}
RETRIEVAL_K = 8
RETRIEVAL_LAYERS = ("messages", "items", "assets")
PROTOCOL_LAYERS = ("assets", "items", "messages")  # PROTOCOL_QA: the knowledge base first
RECAP_BUCKET = 0.1  # recap: reports within this similarity of each other are ordered newest first

# One round trip (context.build_context) for everything but L2 items and retrieval: the hot summary, the
# newest L3 reports (ranked by similarity afterwards), insights and today's messages; it runs while the query
# is embedded. L2 items come from the one ranking (strataflow.retrieval.item_search.subject_memories). An
# empty tsquery part matches nothing. Today's bounds are also bound as parameters (the view computes them
# from current_date) so the planner prunes L1 to today's partition.
SELECT_CANDIDATES = text(
    f"""
    with q as (select {TSQUERY_SQL.format(en=":q_en", zh=":q_zh")} as tsq),
    hot as (
        select 'L2'::text as layer, mi.kind, mi.item_id as id, mi.key as label,
            coalesce(mi.statement, '') as body, null::text as extra, 1.0::real as score,
            mi.valid_from as event_at, mi.source_message_ids as message_ids
        from memory_items as mi
        where mi.namespace = :namespace and mi.subject_id = :subject_id and mi.status = 'active'
            and mi.kind = 'hot_summary' and {visible_to_agent()}
        order by mi.updated_at desc
        limit 1
    ),
    reports as (
        select 'L3'::text as layer, 'weekly_report'::text as kind, wr.report_id as id,
            wr.week_start::text as label, wr.summary as body, null::text as extra,
            coalesce(ts_rank(wr.fts, q.tsq), 0)::real as score,
            wr.week_start::timestamptz as event_at, wr.source_message_ids as message_ids
        from weekly_reports as wr cross join q
        where wr.namespace = :namespace and wr.subject_id = :subject_id
        order by wr.week_start desc
        limit :report_limit
    ),
    current_insights as (
        select 'insight'::text as layer, 'insight'::text as kind, i.insight_id as id, i.key as label,
            i.statement as body, i.question as extra, i.confidence as score,
            i.valid_from as event_at, i.evidence_message_ids as message_ids
        from insights as i
        where i.namespace = :namespace and i.subject_id = :subject_id and i.valid_to is null
        order by i.confidence desc, i.valid_from desc, i.insight_id
        limit :insight_limit
    ),
    today as (
        select 'L1'::text as layer, 'message'::text as kind, p.memory_id as id, p.role as label,
            p.text as body, p.intent as extra, 1.0::real as score,
            p.event_at, p.source_message_ids as message_ids
        from perceptual_memory as p
        where p.namespace = :namespace and p.subject_id = :subject_id and p.memory_type = 'message'
            and p.event_at >= :day_start and p.event_at < :day_end
        order by p.event_at desc, p.memory_id desc
        limit :today_limit
    )
    select * from hot
    union all select * from reports
    union all select * from current_insights
    union all select * from today
    """
)


SELECT_REPORT_SIMILARITY = text(
    """
    select report_id, 1 - (embedding <=> :qvec) as similarity
    from weekly_reports
    where report_id = any(:ids) and embedding is not null
    """
)


class ContextPiece(BaseModel):
    """One block of memory in the context, with where it came from."""

    section: str = Field(description="profile, hot, reports, key_items, items, insights, today or related")
    layer: str = Field(description="L1 (message), L2 (item), L3 (weekly report), insight, asset or profile")
    kind: str = Field(
        description="memory kind, hot_summary, weekly_report, insight, message, asset_chunk, user_memory"
    )
    ids: list[int] = Field(
        description="row id(s): item_id, report_id, insight_id, message_id or chunk_id (none for profiles)"
    )
    source_message_ids: list[int] = Field(default_factory=list, description="L1 lineage of the row")
    score: float = Field(
        description="the retrieval ranking's score for items and hits (0 for an item the query reaches by no "
        "measure), similarity for reports, 1.0 otherwise"
    )
    event_at: datetime | None = Field(description="event time of the row (week start for reports)")
    label: str = Field(description="key, week start, role, document or profile type")
    text: str
    tokens: int = Field(0, description="tokens of the rendered piece")


def candidate_rows(conn: Connection, params: dict[str, Any]) -> list[Any]:
    """Every candidate row but retrieval, in one round trip (SELECT_CANDIDATES)."""
    return list(conn.execute(SELECT_CANDIDATES, params))


def retrieval_hits(
    conn: Connection,
    settings: Settings,
    namespace: str,
    subject_id: str,
    query: str,
    intent: str,
    agent_id: str | None,
    query_vec: np.ndarray | Future[np.ndarray] | None,
) -> list[Any]:
    """strataflow.retrieval.search hits for the query (assets first for protocol questions); only the L2
    items the agent may see (the search applies the one visibility rule)."""
    from strataflow.retrieval.search import search

    layers = PROTOCOL_LAYERS if intent == "protocol" else RETRIEVAL_LAYERS
    hits = search(
        conn, settings, namespace, query, subject_id=subject_id, layers=layers, k=RETRIEVAL_K,
        query_embedding=query_vec, agent_id=agent_id,
    )  # fmt: skip
    return hits


def resolve_intent(intent: str | None, query: str) -> ContextIntent:
    """The intent to build for: an explicit seed 001 task type or intent name, else the query's class."""
    if intent is None or not intent.strip():
        return classify_intent(query)
    name = intent.strip()
    if name.upper() in SEED_INTENTS:
        return SEED_INTENTS[name.upper()]
    if name.lower() in INTENTS:
        return name.lower()  # type: ignore[return-value]
    allowed = ", ".join([*SEED_INTENTS, *INTENTS])
    raise ValueError(f"context intent {intent!r} is not one of {allowed}")


def profile_pieces(conn: Connection, namespace: str, subject_id: str, profile: str) -> list[ContextPiece]:
    """The ACTIVE, non-empty seed 002 documents asked for (user, work, both or none), user first."""
    from strataflow.memory.profiles import get_profile, profile_body

    if profile not in PROFILE_DOCS:
        raise ValueError(f"context profile must be user, work, both or none, not {profile!r}")
    pieces = []
    for doc_type in PROFILE_DOCS[profile]:
        document = get_profile(conn, namespace, subject_id, doc_type)
        body = profile_body(document) if document.status == "active" else ""
        if body:
            pieces.append(
                ContextPiece(
                    section="profile",
                    layer="profile",
                    kind=f"{doc_type}_memory",
                    ids=[],
                    score=1.0,
                    event_at=document.updated_at,
                    label=doc_type,
                    text=body,
                )  # fmt: skip
            )
    return pieces


def render_profile_piece(piece: ContextPiece, fmt: str) -> str:
    """A profile piece between seed 002's markers (text), or as a JSON record naming its kind."""
    from strataflow.llm.prompt_blocks import json_text
    from strataflow.memory.profiles import profile_markers

    start, end = profile_markers(piece.label)
    block = (
        f"{start}\n{piece.text}\n{end}"  # piece.text: the document as one escaped JSON line (profile_body)
    )
    if fmt == "json":
        record = {"section": piece.section, "layer": piece.layer, "kind": piece.kind, "ids": piece.ids,
                  "label": piece.label, "text": block}  # fmt: skip
        return json_text(record)
    return block + "\n"


def rank_reports(
    conn: Connection, reports: list[ContextPiece], query: str, intent: str, query_vec: np.ndarray | None
) -> list[ContextPiece]:
    """Reports best first: by similarity to the query (seed 001 searchWeeklyReports), newest first among
    near-equal ones for recap questions. Recap and qa use the query embedding; the other intents use the
    full-text rank the candidates carry."""
    if len(reports) < 2 or not query.strip():
        return reports
    similarity = {p.ids[0]: min(1.0, p.score * 10) for p in reports}  # ts_rank is small: scale it
    if intent in REPORT_LIMITS and query_vec is not None:
        params = {"ids": list(similarity), "qvec": query_vec}
        for row in conn.execute(SELECT_REPORT_SIMILARITY, params):
            similarity[int(row.report_id)] = max(similarity[int(row.report_id)], float(row.similarity))

    def order(piece: ContextPiece) -> tuple[float, float]:
        sim = similarity[piece.ids[0]]
        when = piece.event_at.timestamp() if piece.event_at else 0.0
        return (-(sim // RECAP_BUCKET) if intent == "recap" else -sim, -when)

    return [
        p.model_copy(update={"score": round(similarity[p.ids[0]], 4)}) for p in sorted(reports, key=order)
    ]


def report_limit(intent: str) -> int:
    return REPORT_LIMITS.get(intent, 1)


def hint_kinds_for(intent: str) -> tuple[str, ...]:
    return INTENT_HINT_KINDS.get(intent, ())
