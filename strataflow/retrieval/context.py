"""Context for a prompt (seed 001 getContextForPrompt, seed 003 prefetch): the memory an agent should see for
one query, chosen by the query's intent and cut to a token budget.

What goes in, highest value first (the order of sections is the order of value for the query's intent):

- recap ("what happened last week", "总结一下最近的进展"): L3 weekly reports (newest first), the key L2 facts,
  today's perceptual memory, the nightly hot summary, retrieval hits, insights;
- fact ("how old am I", "我在哪家公司工作"): L2 facts and profile items (matching ones first, then by
  importance), current insights, today, retrieval hits, the latest weekly report;
- other: the key L2 facts, today, the hot summary, retrieval hits, insights, the latest weekly report.

Key L2 items are always there: the first ``KEY_ITEMS`` of them come before anything but the recap's newest
report. Items rank by: the query's words point at their key or kind (KEY_HINTS: 公司/work -> company),
then a full-text match, then importance, then the newest event time.
"Today" is the perceptual_memory view (messages with event time today in STRATAFLOW_TIMEZONE). Retrieval hits
(L1 messages, asset chunks, and L2 items the full-text match missed) come from
strataflow.retrieval.search.search; it is the fallback, skipped (with its query embedding) when memory already
fills 90% of the budget.

Budget: every piece is counted once with litellm.token_counter (the default tokenizer), pieces are taken
greedily in value order while they fit (a piece that does not fit is skipped, a smaller later one may still
fit; the first report or item is shortened to fit rather than dropped), and the final text is counted once
more: if joining pieces added tokens, the lowest-value pieces go until the exact count is within the budget.
Each piece carries its provenance: layer, ids, score and time. Reads never filter on expires_at.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field
from sqlalchemy import Connection, text

from strataflow.config import Settings
from strataflow.llm.prompt_blocks import escape_json, escape_markup
from strataflow.retrieval.query_intent import Intent, classify_intent, key_hints
from strataflow.textsearch import TSQUERY_SQL, or_query_parts
from strataflow.timeutil import day_bounds

Format = Literal["text", "json"]

KEY_ITEMS = 5  # L2 items that always come early, whatever the intent
ITEM_LIMIT = 40
REPORT_LIMIT = 4
INSIGHT_LIMIT = 8
TODAY_LIMIT = 15
RETRIEVAL_K = 8
RETRIEVAL_LAYERS = ("messages", "items", "assets")
MAX_PIECE_CHARS = {"L1": 600, "asset": 600, "L2": 400, "L3": 2400, "insight": 400, "hot": 1200}
MIN_SHORTENED_TOKENS = 24  # do not shorten a piece to less than this

SECTION_ORDER: dict[str, tuple[str, ...]] = {
    "recap": ("reports", "key_items", "today", "hot", "more_reports", "related", "insights", "items"),
    "fact": ("key_items", "items", "insights", "today", "related", "reports"),
    "other": ("key_items", "today", "hot", "related", "insights", "reports", "items"),
}
SECTION_TITLES = {
    "reports": "Weekly reports (L3)",
    "more_reports": "Weekly reports (L3)",
    "key_items": "Key facts and profile (L2)",
    "items": "More memory items (L2)",
    "insights": "Insights (L3)",
    "today": "Today (L1, perceptual memory)",
    "hot": "Recent summary (L2 hot memory)",
    "related": "Related messages and documents (retrieval)",
}
REPORTS_OUTSIDE_RECAP = 1

# One round trip for everything but retrieval: L2 items (hinted and full-text matches first), L3 reports,
# insights and today's messages. An empty tsquery part matches nothing. Today's bounds are also bound as
# parameters (the view computes them from current_date) so the planner prunes L1 to today's partition.
SELECT_CANDIDATES = text(
    f"""
    with q as (select {TSQUERY_SQL.format(en=":q_en", zh=":q_zh")} as tsq),
    items as (
        select 'L2'::text as layer, mi.kind, mi.item_id as id, mi.key as label,
            coalesce(mi.statement, '') as body, mi.value::text as extra,
            mi.importance::real / 100
                + 0.5 * (mi.key = any(:hint_keys) or mi.kind = any(:hint_kinds))::int
                + 0.3 * coalesce(mi.fts @@ q.tsq, false)::int as score,
            coalesce(mi.fts @@ q.tsq, false) as matched, mi.valid_from as event_at,
            mi.source_message_ids as message_ids
        from memory_items as mi cross join q
        where mi.namespace = :namespace and mi.subject_id = :subject_id and mi.status = 'active'
        order by 2 * (mi.key = any(:hint_keys) or mi.kind = any(:hint_kinds))::int
            + coalesce(mi.fts @@ q.tsq, false)::int desc,
            array_position(cast(:hint_keys as text[]), mi.key), mi.importance desc, mi.valid_from desc
        limit :item_limit
    ),
    reports as (
        select 'L3'::text as layer, 'weekly_report'::text as kind, wr.report_id as id,
            wr.week_start::text as label, wr.summary as body, null::text as extra, 1.0::real as score,
            false as matched, wr.week_start::timestamptz as event_at, wr.source_message_ids as message_ids
        from weekly_reports as wr
        where wr.namespace = :namespace and wr.subject_id = :subject_id
        order by wr.week_start desc
        limit :report_limit
    ),
    current_insights as (
        select 'insight'::text as layer, 'insight'::text as kind, i.insight_id as id, i.key as label,
            i.statement as body, i.question as extra, i.confidence as score, false as matched,
            i.valid_from as event_at, i.evidence_message_ids as message_ids
        from insights as i
        where i.namespace = :namespace and i.subject_id = :subject_id and i.valid_to is null
        order by i.confidence desc, i.valid_from desc
        limit :insight_limit
    ),
    today as (
        select 'L1'::text as layer, 'message'::text as kind, p.memory_id as id, p.role as label,
            p.text as body, p.intent as extra, 1.0::real as score, false as matched,
            p.event_at, p.source_message_ids as message_ids
        from perceptual_memory as p
        where p.namespace = :namespace and p.subject_id = :subject_id and p.memory_type = 'message'
            and p.event_at >= :day_start and p.event_at < :day_end
        order by p.event_at desc
        limit :today_limit
    )
    select * from items
    union all select * from reports
    union all select * from current_insights
    union all select * from today
    """
)


class ContextPiece(BaseModel):
    """One block of memory in the context, with where it came from."""

    section: str = Field(description="reports, key_items, items, insights, today, hot or related")
    layer: str = Field(description="L1 (message), L2 (item), L3 (weekly report), insight or asset")
    kind: str = Field(description="memory kind, weekly_report, insight, message or asset_chunk")
    ids: list[int] = Field(
        description="the row id(s): item_id, report_id, insight_id, message_id or chunk_id"
    )
    source_message_ids: list[int] = Field(default_factory=list, description="L1 lineage of the row")
    score: float = Field(description="importance/100 for items, retrieval score for hits, 1.0 otherwise")
    event_at: datetime | None = Field(description="event time of the row (week start for reports)")
    label: str = Field(description="key, week start, role or document")
    text: str
    tokens: int = Field(0, description="tokens of the rendered piece")


class ContextResult(BaseModel):
    """What build_context returns; `text` is the block to put in the prompt."""

    namespace: str
    subject_id: str
    query: str
    intent: Intent
    format: Format
    budget_tokens: int
    tokens: int = Field(description="litellm.token_counter of text, always <= budget_tokens")
    text: str
    pieces: list[ContextPiece]
    count_candidates: int
    count_dropped: int


def count_tokens(value: str) -> int:
    """Tokens of value as the budget counts them: litellm.token_counter with its default tokenizer."""
    from strataflow.llm import lazy

    return int(lazy.litellm().token_counter(text=value))


def build_context(
    conn: Connection,
    settings: Settings,
    namespace: str,
    subject_id: str,
    query: str,
    budget_tokens: int = 2000,
    fmt: Format = "text",
) -> ContextResult:
    """The memory block for one query of one subject, within budget_tokens (see the module docstring)."""
    if fmt not in ("text", "json"):
        raise ValueError(f"context format must be 'text' or 'json', not {fmt!r}")
    intent = classify_intent(query)
    sections = _candidate_sections(conn, settings, namespace, subject_id, query, intent)
    head, tail = _wrapper(fmt, namespace, subject_id, intent)
    fixed = count_tokens(head + tail)
    if budget_tokens < fixed:
        raise ValueError(
            f"budget_tokens {budget_tokens} is below the {fixed} tokens of an empty context block"
        )
    chosen = _select(sections, intent, budget_tokens - fixed, fmt, settings)
    if _needs_retrieval(chosen, budget_tokens - fixed):
        sections["related"] = _retrieval_pieces(conn, settings, namespace, subject_id, query, sections)
        chosen = _select(sections, intent, budget_tokens - fixed, fmt, settings)
    rendered, chosen = _fit_exactly(chosen, intent, fmt, head, tail, budget_tokens, settings)
    candidates = sum(len(pieces) for pieces in sections.values())
    return ContextResult(
        namespace=namespace, subject_id=subject_id, query=query, intent=intent, format=fmt,
        budget_tokens=budget_tokens, tokens=count_tokens(rendered), text=rendered, pieces=chosen,
        count_candidates=candidates, count_dropped=candidates - len(chosen),
    )  # fmt: skip


def _candidate_sections(
    conn: Connection, settings: Settings, namespace: str, subject_id: str, query: str, intent: Intent
) -> dict[str, list[ContextPiece]]:
    q_en, q_zh = or_query_parts(query)
    q_zh = " | ".join(token for token in q_zh.split(" | ") if len(token) > 1)  # 我, 在, 的: noise here
    hint_keys, hint_kinds = key_hints(query)
    day_start, day_end = day_bounds(datetime.now(settings.tz).date(), settings.tz)
    params = {
        "hint_keys": hint_keys, "hint_kinds": hint_kinds, "day_start": day_start, "day_end": day_end,
        "namespace": namespace, "subject_id": subject_id, "q_en": q_en, "q_zh": q_zh,
        "item_limit": ITEM_LIMIT,
        "report_limit": REPORT_LIMIT if intent == "recap" else REPORTS_OUTSIDE_RECAP,
        "insight_limit": INSIGHT_LIMIT, "today_limit": TODAY_LIMIT,
    }  # fmt: skip
    sections: dict[str, list[ContextPiece]] = {name: [] for name in SECTION_TITLES}
    items: list[ContextPiece] = []
    for row in conn.execute(SELECT_CANDIDATES, params):
        piece = _piece_from_row(row)
        if row.layer == "L2":
            if row.kind == "hot_summary":
                sections["hot"].append(piece.model_copy(update={"section": "hot", "layer": "L2"}))
            else:
                items.append(piece)
        else:
            name = {"L3": "reports", "insight": "insights", "L1": "today"}[row.layer]
            sections[name].append(piece.model_copy(update={"section": name}))
    sections["key_items"] = [p.model_copy(update={"section": "key_items"}) for p in items[:KEY_ITEMS]]
    older = sections["reports"][1:]
    sections["reports"] = sections["reports"][:1]
    sections["more_reports"] = [p.model_copy(update={"section": "more_reports"}) for p in older]
    sections["items"] = items[KEY_ITEMS:]
    return sections


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
) -> list[ContextPiece]:
    """Retrieval hits not already in the context: L1 messages, asset chunks and L2 items."""
    from strataflow.retrieval.search import search

    if not query.strip():
        return []
    seen = {(p.layer, p.ids[0]) for pieces in sections.values() for p in pieces}
    layer_of = {"messages": "L1", "items": "L2", "reports": "L3", "assets": "asset"}
    pieces = []
    for hit in search(
        conn, settings, namespace, query, subject_id=subject_id, layers=RETRIEVAL_LAYERS, k=RETRIEVAL_K
    ):
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


def _needs_retrieval(chosen: list[ContextPiece], room: int) -> bool:
    """Retrieval is the fallback: skip it (and its query embedding) when memory already fills the budget."""
    return sum(p.tokens for p in chosen) < room * 0.9


def _select(
    sections: dict[str, list[ContextPiece]], intent: Intent, room: int, fmt: Format, settings: Settings
) -> list[ContextPiece]:
    """Greedy by value: sections in the intent's order, pieces in order; counts each piece once."""
    chosen: list[ContextPiece] = []
    used = 0
    for name in SECTION_ORDER[intent]:
        header_cost = count_tokens(_section_header(name)) if fmt == "text" else 0
        header_paid = False
        for piece in sections.get(name, []):
            left = room - used - (0 if header_paid else header_cost)
            if left < 4:
                break
            if not piece.tokens:
                piece.tokens = count_tokens(_render_piece(piece, fmt, settings))
            candidate = piece
            left -= 1 if fmt == "json" else 0  # the ", " between JSON pieces
            if piece.tokens > left and not chosen and left >= MIN_SHORTENED_TOKENS:
                candidate = _shorten(piece, left, fmt, settings)  # the most valuable piece: shorten, not drop
            if candidate.tokens > left:
                continue
            chosen.append(candidate)
            used += candidate.tokens + (0 if header_paid else header_cost) + (1 if fmt == "json" else 0)
            header_paid = True
    return chosen


def _shorten(piece: ContextPiece, max_tokens: int, fmt: Format, settings: Settings) -> ContextPiece:
    """The piece with its text cut (binary search on characters) so the rendered piece fits max_tokens."""
    low, high, best = 0, len(piece.text), None
    while low <= high:
        middle = (low + high) // 2
        trial = piece.model_copy(update={"text": piece.text[:middle].rstrip() + " …", "tokens": 0})
        trial.tokens = count_tokens(_render_piece(trial, fmt, settings))
        if trial.tokens <= max_tokens:
            best, low = trial, middle + 1
        else:
            high = middle - 1
    return best if best is not None else piece


def _fit_exactly(
    chosen: list[ContextPiece],
    intent: Intent,
    fmt: Format,
    head: str,
    tail: str,
    budget: int,
    settings: Settings,
) -> tuple[str, list[ContextPiece]]:
    """Render, count the whole text once, and drop the lowest-value pieces while it is over budget."""
    pieces = list(chosen)
    while True:
        rendered = _render(pieces, intent, fmt, head, tail, settings)
        if not pieces or count_tokens(rendered) <= budget:
            return rendered, pieces
        pieces.pop()


def _wrapper(fmt: Format, namespace: str, subject_id: str, intent: Intent) -> tuple[str, str]:
    if fmt == "json":
        head = json.dumps(
            {"memory_context": {"namespace": namespace, "subject_id": subject_id, "intent": intent}},
            ensure_ascii=False,
        )
        return head[:-2] + ', "pieces": [', "]}}"
    attrs = f'namespace="{_attr(namespace)}" subject="{_attr(subject_id)}" intent="{intent}"'
    return f"<memory-context {attrs}>\n", "</memory-context>"


def _render(
    pieces: list[ContextPiece], intent: Intent, fmt: Format, head: str, tail: str, settings: Settings
) -> str:
    """Pieces grouped by section title, in the intent's value order (older reports with the newest)."""
    order = [name for name in SECTION_ORDER[intent] if name != "more_reports"]
    if "reports" in order:
        order.insert(order.index("reports") + 1, "more_reports")
    ordered = [p for name in order for p in pieces if p.section == name]
    if fmt == "json":
        return head + ", ".join(_render_piece(p, fmt, settings) for p in ordered) + tail
    lines = []
    title = None
    for piece in ordered:
        if SECTION_TITLES[piece.section] != title:
            title = SECTION_TITLES[piece.section]
            lines.append(_section_header(piece.section))
        lines.append(_render_piece(piece, fmt, settings))
    return head + "".join(lines) + tail


def _section_header(name: str) -> str:
    return f"## {SECTION_TITLES[name]}\n"


def _render_piece(piece: ContextPiece, fmt: Format, settings: Settings) -> str:
    when = None
    if piece.event_at is not None:
        local = piece.event_at.astimezone(settings.tz)
        when = (
            local.strftime("%Y-%m-%d %H:%M") if piece.layer in ("L1", "asset") else local.strftime("%Y-%m-%d")
        )
    if fmt == "json":
        record = {
            "section": piece.section, "layer": piece.layer, "kind": piece.kind, "ids": piece.ids,
            "source_message_ids": piece.source_message_ids, "score": piece.score, "event_at": when,
            "label": piece.label, "text": piece.text,
        }  # fmt: skip
        return escape_json(json.dumps(record, ensure_ascii=False))
    ident = "+".join(str(i) for i in piece.ids)
    what = f"{piece.kind}:{escape_markup(piece.label)}" if piece.label else piece.kind
    provenance = f"{piece.layer} {what} id={ident} score={piece.score:g}" + (f" at={when}" if when else "")
    if piece.source_message_ids and piece.layer != "L1":
        provenance += " from=" + ",".join(str(i) for i in piece.source_message_ids[:5])
    # User text is data: it cannot close <memory-context> or open a marker (escape_markup).
    return f"- [{provenance}] {escape_markup(piece.text).replace(chr(10), chr(10) + '  ')}\n"


def _clip(value: str, limit: int) -> str:
    value = " ".join(value.split()) if "\n" not in value else value.strip()
    return value if len(value) <= limit else value[: limit - 1].rstrip() + "…"


def _attr(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
