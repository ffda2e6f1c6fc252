"""The token budget of a context block, and its rendering: strataflow.retrieval.context gathers the candidate
pieces by section; this module chooses among them and renders the block (the budget counts rendered text, so
both live here).

Every piece is counted once with litellm.token_counter (the default tokenizer). Pieces are taken greedily in
value order (SECTION_ORDER: each intent's sections, most valuable first) while they fit: a piece that does not
fit is skipped, and a smaller later one may still fit; the first piece, the profiles and the hot memory are
shortened to fit rather than dropped. The final text is counted once more: if joining pieces added tokens,
the lowest-value pieces go until the exact count is within the budget. Text pieces are `- [provenance] "text"`
lines under SECTION_TITLES inside <memory-context>, the text a JSON string literal; JSON pieces are records in
a `memory_context` object. User text (and a label that is not a plain word) is written by the one escaping
function, strataflow.llm.prompt_blocks.quote_text / json_text: it cannot close the block, open a marker or
start a line of its own, and parse_text_block reads the pieces back exactly.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from strataflow.config import Settings
from strataflow.llm.prompt_blocks import json_text, quote_text
from strataflow.retrieval.context_parts import ContextIntent, ContextPiece, render_profile_piece

Format = Literal["text", "json"]

MIN_SHORTENED_TOKENS = 24  # do not shorten a piece to less than this
PLAIN_LABEL = re.compile(r"^[\w.:@+-]+$")  # a key, a role, a week start: written as it is
QUOTED = r'"(?:[^"\\]|\\.)*"'
PIECE_LINE = re.compile(
    rf"^- \[(?P<layer>\S+) (?P<kind>[^\s:\]]+)(?::(?P<label>{QUOTED}|[\w.:@+-]+))? (?P<rest>id=[^\]]*)\] "
    rf"(?P<text>{QUOTED})$"
)

SECTION_ORDER: dict[str, tuple[str, ...]] = {
    "recap": (
        "profile",
        "hot",
        "reports",
        "key_items",
        "today",
        "more_reports",
        "related",
        "insights",
        "items",
    ),
    "fact": ("profile", "hot", "key_items", "items", "insights", "today", "related", "reports"),
    "other": ("profile", "hot", "key_items", "today", "related", "insights", "reports", "items"),
    "qa": ("profile", "hot", "reports", "related", "key_items", "more_reports", "items", "insights", "today"),
    "task": ("profile", "hot", "key_items", "today", "items", "related", "insights"),
    "protocol": ("profile", "hot", "related", "key_items", "items", "insights", "today"),
}
SECTION_TITLES = {
    "profile": "",
    "reports": "Weekly reports (L3)",
    "more_reports": "Weekly reports (L3)",
    "key_items": "Key facts and profile (L2)",
    "items": "More memory items (L2)",
    "insights": "Insights (L3)",
    "today": "Today (L1, perceptual memory)",
    "hot": "Recent summary (L2 hot memory)",
    "related": "Related messages and documents (retrieval)",
}


def count_tokens(value: str) -> int:
    """Tokens of value as the budget counts them: litellm.token_counter with its default tokenizer."""
    from strataflow.llm import lazy

    return int(lazy.litellm().token_counter(text=value))


def needs_retrieval(chosen: list[ContextPiece], room: int) -> bool:
    """Retrieval is the fallback: skip it when memory already fills the budget."""
    return sum(p.tokens for p in chosen) < room * 0.9


def select_pieces(
    sections: dict[str, list[ContextPiece]], intent: ContextIntent, room: int, fmt: Format, settings: Settings
) -> list[ContextPiece]:
    """Greedy by value: sections in the intent's order, pieces in order; counts each piece once."""
    chosen: list[ContextPiece] = []
    used = 0
    for name in SECTION_ORDER[intent]:
        header_cost = count_tokens(_section_header(name)) if fmt == "text" and name != "profile" else 0
        header_paid = False
        for piece in sections.get(name, []):
            left = room - used - (0 if header_paid else header_cost)
            if left < 4:
                break
            if not piece.tokens:
                piece.tokens = count_tokens(_piece_text(piece, fmt, settings))
            candidate = piece
            left -= 1 if fmt == "json" else 0  # the ", " between JSON pieces
            shorten = not chosen or piece.section in ("profile", "hot")  # always injected: shorten, not drop
            if piece.tokens > left and shorten and left >= MIN_SHORTENED_TOKENS:
                candidate = _shorten(piece, left, fmt, settings)
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
        trial.tokens = count_tokens(_piece_text(trial, fmt, settings))
        if trial.tokens <= max_tokens:
            best, low = trial, middle + 1
        else:
            high = middle - 1
    return best if best is not None else piece


def fit_exactly(
    chosen: list[ContextPiece],
    intent: ContextIntent,
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


def block_wrapper(fmt: Format, namespace: str, subject_id: str, intent: ContextIntent) -> tuple[str, str]:
    """The block's opening and closing text; an empty block (head + tail) is valid JSON with no pieces."""
    if fmt == "json":
        head = json_text(
            {"memory_context": {"namespace": namespace, "subject_id": subject_id, "intent": intent}}
        )
        return head[:-2] + ', "pieces": [', "]}}"
    attrs = f"namespace={quote_text(namespace)} subject={quote_text(subject_id)} intent={quote_text(intent)}"
    return f"<memory-context {attrs}>\n", "</memory-context>"


def _render(
    pieces: list[ContextPiece], intent: ContextIntent, fmt: Format, head: str, tail: str, settings: Settings
) -> str:
    """Pieces grouped by section title, in the intent's value order (older reports with the newest)."""
    order = [name for name in SECTION_ORDER[intent] if name != "more_reports"]
    if "reports" in order:
        order.insert(order.index("reports") + 1, "more_reports")
    ordered = [p for name in order for p in pieces if p.section == name]
    if fmt == "json":
        return head + ", ".join(_piece_text(p, fmt, settings) for p in ordered) + tail
    lines = []
    title = None
    for piece in ordered:
        if SECTION_TITLES[piece.section] != title:
            title = SECTION_TITLES[piece.section]
            lines.append(_section_header(piece.section))
        lines.append(_piece_text(piece, fmt, settings))
    return head + "".join(lines) + tail


def _section_header(name: str) -> str:
    return f"## {SECTION_TITLES[name]}\n" if SECTION_TITLES[name] else ""


def _piece_text(piece: ContextPiece, fmt: Format, settings: Settings) -> str:
    """A profile document between its seed 002 markers, any other piece as _render_piece renders it."""
    if piece.section == "profile":
        return render_profile_piece(piece, fmt)
    return _render_piece(piece, fmt, settings)


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
        return json_text(record)
    ident = "+".join(str(i) for i in piece.ids)
    label = piece.label if PLAIN_LABEL.match(piece.label) else quote_text(piece.label)
    what = f"{piece.kind}:{label}" if piece.label else piece.kind
    provenance = f"{piece.layer} {what} id={ident} score={piece.score:g}" + (f" at={when}" if when else "")
    if piece.source_message_ids and piece.layer != "L1":
        provenance += " from=" + ",".join(str(i) for i in piece.source_message_ids[:5])
    # User text is data: one JSON string on the piece's line (quote_text), never a marker or a line of its
    # own.
    return f"- [{provenance}] {quote_text(piece.text)}\n"


def parse_text_block(block: str) -> list[dict[str, Any]]:
    """The pieces of a text context block, read back: [{"section", "layer", "kind", "label", "provenance",
    "text"}] in order
    (what an agent framework, or a test, gets out of the block). A line that is neither the wrapper, a section
    title, a profile marker or document, nor a piece raises ValueError naming it."""
    titles: dict[str, str] = {}
    for name, title in SECTION_TITLES.items():
        if title:
            titles.setdefault(f"## {title}", name)  # reports and more_reports share a title: reports
    pieces: list[dict[str, Any]] = []
    section = ""
    for number, line in enumerate(block.split("\n"), start=1):
        if line.startswith("<memory-context ") or line in ("", "</memory-context>"):
            continue
        if line.startswith("<!-- ") or line.startswith("{"):  # seed 002 markers and their JSON document
            continue
        if line in titles:
            section = titles[line]
            continue
        found = PIECE_LINE.match(line)
        if found is None:
            raise ValueError(f"line {number} of the context block is not a piece: {line[:60]!r}")
        label = found.group("label") or ""
        pieces.append(
            {
                "section": section,
                "layer": found.group("layer"),
                "kind": found.group("kind"),
                "label": json.loads(label) if label.startswith('"') else label,
                "provenance": found.group("rest"),
                "text": json.loads(found.group("text")),
            }
        )
    return pieces
