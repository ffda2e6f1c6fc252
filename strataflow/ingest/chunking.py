"""Token-bounded chunks of data assets: text split on headings, paragraphs and sentences; table rows with
their header; JSON records. Pure functions (no I/O), used by strataflow/pipeline/assets.py.

Tokens are counted with the one default counter (strataflow.llm.tokens.count_tokens, cl100k_base). The
chunks are embedded by all-MiniLM-L6-v2, whose window is 256 WordPiece tokens ([CLS] and [SEP] included)
and which ignores the rest, so MAX_TOKENS leaves room for the difference between the two tokenizers.
Measured with the model's own tokenizer on this repository's docs (English Markdown with code and SQL),
Chinese and mixed Chinese/English prose, CSV tables and JSON records: chunks of at most 170 counted tokens
held at most 226 WordPiece tokens (English; Chinese at most 158, as WordPiece gives one piece per Chinese
character and cl100k_base one or more; mixed 178, CSV 168, JSON 186); at 180 English reached 239, at 200
264. (The basic-tokenizer estimate used before let 37 of 730 chunks of the same texts overflow at its 200.)
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from strataflow.llm.tokens import count_tokens, token_offsets

MAX_TOKENS = 170
OVERLAP_TOKENS = 40
MIN_BODY_TOKENS = 32  # a long heading or header never leaves less than this for the body

HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
SENTENCE = re.compile(r".+?(?:[.!?](?=\s)|[。！？；]|$)", re.S)


@dataclass
class Chunk:
    content: str
    token_count: int
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Unit:
    """The smallest piece packed into chunks, with the separator that goes before it inside a chunk."""

    text: str
    tokens: int
    joiner: str = "\n"
    meta: int | None = None  # row or record number, kept as a range in the chunk metadata


def pack(
    units: Sequence[Unit],
    max_tokens: int = MAX_TOKENS,
    overlap: int = OVERLAP_TOKENS,
    prefix: str = "",
    metadata: dict[str, Any] | None = None,
) -> list[Chunk]:
    """Greedy packing of units into chunks of at most max_tokens (prefix included, repeated in each chunk);
    each chunk after the first starts with the trailing units of the previous one, up to `overlap` tokens."""
    prefix_tokens = count_tokens(prefix)
    budget = max(max_tokens - prefix_tokens, MIN_BODY_TOKENS)
    pieces = [piece for unit in units for piece in _split_long(unit, budget, overlap)]
    groups: list[list[Unit]] = []
    current: list[Unit] = []
    used = 0
    for unit in pieces:
        if current and used + unit.tokens > budget:
            groups.append(current)
            current, used = _tail(current, overlap)
            if used + unit.tokens > budget:
                current, used = [], 0
        current.append(unit)
        used += unit.tokens
    if current:
        groups.append(current)
    return [_chunk(group, prefix, prefix_tokens, metadata or {}) for group in groups]


def _tail(units: list[Unit], overlap: int) -> tuple[list[Unit], int]:
    tail: list[Unit] = []
    used = 0
    for unit in reversed(units):
        if used + unit.tokens > overlap:
            break
        tail.insert(0, unit)
        used += unit.tokens
    return tail, used


def _chunk(group: list[Unit], prefix: str, prefix_tokens: int, metadata: dict[str, Any]) -> Chunk:
    body = group[0].text + "".join(unit.joiner + unit.text for unit in group[1:])
    content = f"{prefix}\n{body}" if prefix else body
    meta = dict(metadata)
    numbers = [unit.meta for unit in group if unit.meta is not None]
    if numbers:
        meta["rows"] = [min(numbers), max(numbers)]
    return Chunk(
        content=content, token_count=prefix_tokens + sum(unit.tokens for unit in group), metadata=meta
    )


def _split_long(unit: Unit, budget: int, overlap: int) -> list[Unit]:
    """A unit over the budget becomes windows of at most `budget` tokens that overlap by `overlap` tokens."""
    if unit.tokens <= budget:
        return [unit]
    offsets = token_offsets(unit.text) + [len(unit.text)]
    step = max(budget - overlap, 1)
    windows = []
    for start in range(0, len(offsets) - 1, step):
        end = min(start + budget, len(offsets) - 1)
        while True:  # cut apart, the window may count a token more than its share: then it ends one earlier
            text = unit.text[offsets[start] : offsets[end]].strip()
            tokens = count_tokens(text)
            if tokens <= budget or end - start <= 1:
                break
            end -= 1
        if text:
            windows.append(Unit(text, tokens, " ", unit.meta))
        if end >= len(offsets) - 1:
            break
    # the first window keeps the unit's own joiner; windows already overlap, so they are packed one per chunk
    windows[0] = Unit(windows[0].text, windows[0].tokens, unit.joiner, unit.meta)
    return windows


def sentence_units(paragraph: str) -> list[Unit]:
    """Sentences of one paragraph, each joined to the previous by the whitespace that separated them."""
    units: list[Unit] = []
    last_end = 0
    for match in SENTENCE.finditer(paragraph):
        sentence = match.group().strip()
        if not sentence:
            continue
        start = match.start() + (len(match.group()) - len(match.group().lstrip()))
        joiner = "\n\n" if not units else (" " if paragraph[last_end:start] else "")
        units.append(Unit(sentence, count_tokens(sentence), joiner))
        last_end = start + len(sentence)
    return units


def markdown_sections(text: str) -> list[tuple[str, str]]:
    """(heading path such as "Guide / Fees", body) per section; text before the first heading has path ""."""
    sections: list[tuple[str, str]] = []
    path: list[tuple[int, str]] = []
    body: list[str] = []
    current = ""
    for line in text.splitlines():
        heading = HEADING.match(line)
        if heading:
            sections.append((current, "\n".join(body)))
            level = len(heading.group(1))
            path = [(lvl, title) for lvl, title in path if lvl < level] + [(level, heading.group(2))]
            current, body = " / ".join(title for _, title in path), []
        else:
            body.append(line)
    sections.append((current, "\n".join(body)))
    return [(heading, content) for heading, content in sections if content.strip() or heading]


def chunk_text(
    text: str, markdown: bool = True, max_tokens: int = MAX_TOKENS, overlap: int = OVERLAP_TOKENS
) -> list[Chunk]:
    """Chunks of a text document: per section (Markdown headings), sentences packed with overlap."""
    sections = markdown_sections(text) if markdown else [("", text)]
    chunks: list[Chunk] = []
    for heading, body in sections:
        units = [unit for paragraph in PARAGRAPH_BREAK.split(body) for unit in sentence_units(paragraph)]
        if not units:
            if heading:
                chunks.append(Chunk(heading, count_tokens(heading), {"heading": heading}))
            continue
        chunks.extend(
            pack(units, max_tokens, overlap, prefix=heading, metadata={"heading": heading} if heading else {})
        )
    return chunks


def row_line(values: Iterable[Any]) -> str:
    return " | ".join(_cell(value) for value in values)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value != value:  # NaN
        return ""
    return " ".join(str(value).split())


def chunk_rows(
    title: str, header: Sequence[str], rows: Iterable[tuple[int, Sequence[Any]]], max_tokens: int = MAX_TOKENS
) -> list[Chunk]:
    """Groups of table rows, each chunk starting with the title and the header line (rows numbered from 1)."""
    prefix = f"{title}\n{row_line(header)}"
    units = [
        Unit(line, count_tokens(line), "\n", number) for number, values in rows if (line := row_line(values))
    ]
    return pack(units, max_tokens, overlap=0, prefix=prefix)


def record_line(record: Any) -> str:
    """One JSON record on one line: `key: value; key: value` for an object, compact JSON otherwise."""
    if isinstance(record, dict):
        return "; ".join(f"{key}: {_json_value(value)}" for key, value in record.items())
    return _json_value(record)


def _json_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def chunk_json(title: str, data: Any, max_tokens: int = MAX_TOKENS) -> list[Chunk]:
    """A list: groups of records. An object: one line per key (`key: value`), one per element of a list value
    (`key: record`), grouped. A bare value: its pretty-printed lines."""
    if isinstance(data, list):
        return chunk_records(title, enumerate(data, start=1), max_tokens)
    if isinstance(data, dict):
        lines: list[str] = []
        for key, value in data.items():
            items = value if isinstance(value, list) else [value]
            lines.extend(f"{key}: {record_line(item)}" for item in items)
        return pack([Unit(line, count_tokens(line), "\n") for line in lines], max_tokens, 0, prefix=title)
    lines = json.dumps(data, ensure_ascii=False, indent=2).splitlines()
    return pack([Unit(line, count_tokens(line), "\n") for line in lines], max_tokens, OVERLAP_TOKENS, title)


def chunk_records(
    title: str, records: Iterable[tuple[int, Any]], max_tokens: int = MAX_TOKENS
) -> list[Chunk]:
    units = [
        Unit(line, count_tokens(line), "\n", number)
        for number, record in records
        if (line := record_line(record))
    ]
    return pack(units, max_tokens, overlap=0, prefix=title)
