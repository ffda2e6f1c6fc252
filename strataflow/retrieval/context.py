"""Context for a prompt (seed 001 getContextForPrompt, seed 003 prefetch): the memory an agent should see for
one query, chosen by the query's intent (given, or classified from the query) and cut to a token budget.

What goes in, highest value first (the order of sections is the order of value for the intent). The profile
documents asked for (`profile` user|work|both, seed 002, each between its markers; a DISABLED one is left
out) come first, then the hot memory, which is always injected (seed 001 "始终注入"; shortened rather than
dropped when the budget is tight):

- recap ("what happened last week", "总结一下最近的进展"): L3 weekly reports (by similarity to the query,
  newest first among near-equal ones), the key L2 facts, today's perceptual memory, retrieval hits, insights;
- fact ("how old am I", "我在哪家公司工作"): L2 facts and profile items (matching ones first, then by
  importance), current insights, today, retrieval hits, the most similar weekly report;
- other: the key L2 facts, today, retrieval hits, insights, the most similar weekly report;
- qa, task, protocol (seed 001 QA_QUERY, QC_TASK, PROTOCOL_QA): see strataflow.retrieval.context_parts.

Nothing found gives an empty text (seed 003: inject nothing), not an empty <memory-context> wrapper; with
format json, a valid JSON block with an empty list of pieces.
L2 items are those the one agent-visibility rule lets `agent_id` see (strataflow.memory.api: the
namespace's, shared ones and the agent's own; without an agent, no agent's private items).

Key L2 items are always there: the first ``KEY_ITEMS`` of them come early for every intent. Items are ranked
by the one ranking (strataflow.retrieval.item_search.subject_memories): those the query's words point at by
key or kind first (KEY_HINTS: 公司/work -> company), then the retrieval ranking's order (full text, names,
dense similarity), then importance and the newest event time. The query is embedded once, on a worker thread
while the other candidates are read, for the items, the reports and retrieval. "Today" is the
perceptual_memory view (messages with event time today in STRATAFLOW_TIMEZONE). Retrieval hits (L1 messages,
asset chunks, and L2 items not already in) come from strataflow.retrieval.search.search; it is the fallback,
skipped when memory already fills 90% of the budget.

Budget: the token budget (pieces taken greedily in value order, the first piece, the profiles and the hot
memory shortened rather than dropped, the final text counted exactly) and the rendering of the block are in
strataflow.retrieval.context_budget; this module gathers the candidate pieces and composes the steps. Each
piece carries its provenance: layer, ids, score and time. Reads never filter on expires_at.
"""

from __future__ import annotations

import json
from concurrent.futures import Future
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import numpy as np
from pydantic import BaseModel, Field
from sqlalchemy import Connection

from models.memory_items import MemoryHit
from strataflow import telemetry
from strataflow.config import Settings
from strataflow.llm.tokens import count_tokens
from strataflow.retrieval.context_budget import (
    SECTION_TITLES,
    Format,
    block_wrapper,
    fit_exactly,
    needs_retrieval,
    select_pieces,
)
from strataflow.retrieval.context_parts import (
    ContextIntent,
    ContextPiece,
    candidate_rows,
    hint_kinds_for,
    profile_pieces,
    rank_reports,
    report_limit,
    resolve_intent,
    retrieval_hits,
)
from strataflow.retrieval.item_search import subject_memories
from strataflow.retrieval.query_intent import classify_intent, key_hints
from strataflow.retrieval.search import start_embedding
from strataflow.textsearch import or_query_parts
from strataflow.timeutil import day_bounds

__all__ = ["ContextPiece", "ContextResult", "build_context", "classify_intent"]

KEY_ITEMS = 5  # L2 items that always come early, whatever the intent
ITEM_LIMIT = 40
REPORT_POOL = 12  # the newest reports ranked by similarity to the query
INSIGHT_LIMIT = 8
TODAY_LIMIT = 15
ALWAYS_RETRIEVE = frozenset({"qa", "protocol"})  # seed 001: these intents search L1 / the knowledge base
MAX_PIECE_CHARS = {"L1": 600, "asset": 600, "L2": 400, "L3": 2400, "insight": 400, "hot": 1200}


class ContextResult(BaseModel):
    """What build_context returns; `text` is the block to put in the prompt."""

    namespace: str
    subject_id: str
    query: str
    intent: ContextIntent = Field(description="recap, fact, other, qa, task or protocol")
    format: Format
    budget_tokens: int
    tokens: int = Field(description="llm.tokens.count_tokens of text, always <= budget_tokens (0 when empty)")
    text: str = Field(description="the block to put in the prompt; empty when no memory matched")
    pieces: list[ContextPiece]
    count_candidates: int
    count_dropped: int


@telemetry.traced("context")
def build_context(
    conn: Connection,
    settings: Settings,
    namespace: str,
    subject_id: str,
    query: str,
    budget_tokens: int = 2000,
    fmt: Format = "text",
    *,
    intent: str | None = None,
    profile: str = "none",
    agent_id: str | None = None,
    threshold: float | None = None,
) -> ContextResult:
    """The memory block for one query of one subject, within budget_tokens (see the module docstring).

    intent: a seed 001 task type (QA_QUERY, QC_TASK, PROTOCOL_QA, GENERAL) or an intent name (see
    context_parts); None classifies the query. profile: user|work|both|none (seed 002 documents).
    agent_id: the seed 003 agent scope of L2 items. threshold: L2 items and retrieval hits scoring below it
    are left out (the one absolute score, docs/retrieval.md).
    """
    if fmt not in ("text", "json"):
        raise ValueError(f"context format must be 'text' or 'json', not {fmt!r}")
    chosen_intent = resolve_intent(intent, query)
    sections, query_vec = _candidate_sections(
        conn, settings, namespace, subject_id, query, chosen_intent, agent_id
    )
    sections["profile"] = profile_pieces(conn, namespace, subject_id, profile)
    _keep_scoring(sections, ("key_items", "items"), threshold)
    head, tail = block_wrapper(fmt, namespace, subject_id, chosen_intent)
    fixed = count_tokens(head + tail)
    if budget_tokens < fixed:
        raise ValueError(
            f"budget_tokens {budget_tokens} is below the {fixed} tokens of an empty context block"
        )
    chosen = select_pieces(sections, chosen_intent, budget_tokens - fixed, fmt, settings)
    if chosen_intent in ALWAYS_RETRIEVE or needs_retrieval(chosen, budget_tokens - fixed):
        sections["related"] = _retrieval_pieces(
            conn, settings, namespace, subject_id, query, sections, chosen_intent, agent_id, query_vec
        )
        _keep_scoring(sections, ("related",), threshold)
        chosen = select_pieces(sections, chosen_intent, budget_tokens - fixed, fmt, settings)
    rendered, chosen = fit_exactly(chosen, chosen_intent, fmt, head, tail, budget_tokens, settings)
    if not chosen:  # nothing matched: inject nothing (seed 003); as JSON, a block with no pieces
        rendered = "" if fmt == "text" else head + tail
    candidates = sum(len(pieces) for pieces in sections.values())
    return ContextResult(
        namespace=namespace, subject_id=subject_id, query=query, intent=chosen_intent, format=fmt,
        budget_tokens=budget_tokens, tokens=count_tokens(rendered) if rendered else 0, text=rendered,
        pieces=chosen, count_candidates=candidates, count_dropped=candidates - len(chosen),
    )  # fmt: skip


def _keep_scoring(
    sections: dict[str, list[ContextPiece]], names: tuple[str, ...], threshold: float | None
) -> None:
    """Leave out the pieces of these ranked sections that score below threshold (None: keep all)."""
    if threshold is not None:
        for name in names:
            sections[name] = [p for p in sections[name] if p.score >= threshold]


def _candidate_sections(
    conn: Connection,
    settings: Settings,
    namespace: str,
    subject_id: str,
    query: str,
    intent: ContextIntent,
    agent_id: str | None,
) -> tuple[dict[str, list[ContextPiece]], Future[np.ndarray] | None]:
    """Every section but the profiles and retrieval, and the query's embedding (a Future) for retrieval."""
    # The query's embedding is computed while the candidates are read.
    pending = start_embedding(settings, query, subject_id) if query.strip() else None
    q_en, q_zh = or_query_parts(query)
    q_zh = " | ".join(token for token in q_zh.split(" | ") if len(token) > 1)  # 我, 在, 的: noise here
    hint_keys, hint_kinds = key_hints(query)
    hint_kinds = list(dict.fromkeys([*hint_kinds, *hint_kinds_for(intent)]))
    day_start, day_end = day_bounds(datetime.now(settings.tz).date(), settings.tz)
    params = {
        "day_start": day_start, "day_end": day_end, "namespace": namespace, "subject_id": subject_id,
        "q_en": q_en, "q_zh": q_zh, "report_limit": REPORT_POOL, "agent_id": agent_id,
        "insight_limit": INSIGHT_LIMIT, "today_limit": TODAY_LIMIT,
    }  # fmt: skip
    sections: dict[str, list[ContextPiece]] = {name: [] for name in SECTION_TITLES}
    for row in candidate_rows(conn, params):
        name = {"L2": "hot", "L3": "reports", "insight": "insights", "L1": "today"}[row.layer]
        sections[name].append(_piece_from_row(row).model_copy(update={"section": name}))
    found, _ = subject_memories(
        conn, settings, namespace, subject_id, query, agent_id=agent_id, limit=ITEM_LIMIT,
        hint_keys=hint_keys, hint_kinds=hint_kinds, query_embedding=pending,
    )  # fmt: skip
    items = [_piece_from_row(_item_row(hit)) for hit in found]
    sections["key_items"] = [p.model_copy(update={"section": "key_items"}) for p in items[:KEY_ITEMS]]
    sections["items"] = items[KEY_ITEMS:]
    query_vec = None if pending is None else np.asarray(pending.result(), dtype=np.float32)
    reports = rank_reports(conn, sections["reports"], query, intent, query_vec)
    reports = reports[: report_limit(intent)]
    sections["reports"] = reports[:1]
    sections["more_reports"] = [p.model_copy(update={"section": "more_reports"}) for p in reports[1:]]
    return sections, pending


def _item_row(hit: MemoryHit) -> SimpleNamespace:
    """An L2 item as a candidate row (the columns _piece_from_row reads); `extra`: the value as JSON."""
    extra = None if hit.value is None else json.dumps(hit.value, ensure_ascii=False)
    return SimpleNamespace(
        layer="L2", kind=hit.kind, id=hit.id, label=hit.key, body=hit.statement or "", extra=extra,
        score=hit.score, event_at=hit.valid_from, message_ids=hit.source_message_ids,
    )  # fmt: skip


def _piece_from_row(row: Any) -> ContextPiece:
    body = row.body or ""
    if row.layer == "L2" and row.extra is not None and row.extra not in body:
        body = f"{body} (value: {row.extra})" if body else f"value: {row.extra}"
    if row.layer == "insight" and row.extra:
        body = f"{row.extra} {body}"
    limit = MAX_PIECE_CHARS["hot" if row.kind == "hot_summary" else row.layer]
    return ContextPiece(
        section="items", layer=row.layer, kind=row.kind, ids=[int(row.id)],
        source_message_ids=[int(i) for i in (row.message_ids or [])][:20], score=round(float(row.score), 4),
        event_at=row.event_at, label=str(row.label or ""), text=_clip(body, limit),
    )  # fmt: skip


def _retrieval_pieces(
    conn: Connection,
    settings: Settings,
    namespace: str,
    subject_id: str,
    query: str,
    sections: dict[str, list[ContextPiece]],
    intent: ContextIntent,
    agent_id: str | None,
    query_vec: Future[np.ndarray] | None,
) -> list[ContextPiece]:
    """Retrieval hits not already in the context: L1 messages, asset chunks and L2 items (with an agent,
    only the items it may see)."""
    if not query.strip():
        return []
    seen = {(p.layer, p.ids[0]) for pieces in sections.values() for p in pieces if p.ids}
    layer_of = {"messages": "L1", "items": "L2", "reports": "L3", "assets": "asset"}
    pieces = []
    for hit in retrieval_hits(conn, settings, namespace, subject_id, query, intent, agent_id, query_vec):
        layer = layer_of.get(hit.layer, hit.layer)
        if (layer, int(hit.id)) in seen:
            continue
        seen.add((layer, int(hit.id)))
        metadata = hit.metadata or {}
        label = str(
            metadata.get("key") or metadata.get("role") or metadata.get("title") or metadata.get("uri") or ""
        )
        kind = {"L1": "message", "asset": "asset_chunk"}.get(layer, str(metadata.get("kind") or hit.layer))
        pieces.append(
            ContextPiece(
                section="related",
                layer=layer,
                kind=kind,
                ids=[int(hit.id)],
                source_message_ids=[int(i) for i in metadata.get("source_message_ids") or []][:20],
                score=round(float(hit.score), 4),
                event_at=hit.event_at,
                label=label,
                text=_clip(hit.text or "", MAX_PIECE_CHARS.get(layer, 600)),
            )  # fmt: skip
        )
    return pieces


def _clip(value: str, limit: int) -> str:
    value = " ".join(value.split()) if "\n" not in value else value.strip()
    return value if len(value) <= limit else value[: limit - 1].rstrip() + "…"
