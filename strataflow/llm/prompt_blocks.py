r"""How user content is put inside prompts, and read back by the offline provider.

User content is data, never instructions: it travels as JSON lines between explicit markers, so a
message such as "ignore previous instructions" is a string value inside a JSON object that the model is
told to treat as quoted material. Every stage's prompt uses these blocks; the offline provider parses
them (it reads nothing but its prompt).

    <messages>
    {"id": 12, "role": "user", "time": "2026-11-02T09:00:00+08:00", "text": "..."}
    </messages>
    <memories>
    {"id": 7, "kind": "fact", "key": "age", "value": 32, "statement": "...", "time": "..."}
    </memories>
    <existing_keys>
    fact:age, fact:university, ...
    </existing_keys>

Every prompt also names its stage in a <task> block (extract, rollup, reflect, hot_summary), so a model
(and the offline provider) knows which output schema of models/llm.py to return:

    <task>
    extract
    </task>

User text cannot end a block or start one, nor start a line of its own: it is always written by one function,
`quote_text` (a JSON string literal) or, for whole records, `json_text` (JSON), and both escape the same
characters as \uXXXX inside strings: every "<" (so no marker, tag, comment or `<` + invisible characters can
open or close anything), every line break str.splitlines() knows (\n, \r, \v, \f, U+001C-U+001E, U+0085,
U+2028, U+2029: JSON escapes the ASCII ones, this module the others), the other control characters, the
bidirectional overrides, the characters a reader cannot see (zero-width spaces and joiners, word joiners and
invisible operators, U+FEFF, the soft hyphen, and the Unicode tag characters U+E0000-U+E007F, which spell
hidden ASCII) and the look-alikes of "<" and ">" (full-width U+FF1C/U+FF1E, small U+FE64/U+FE65), so a
full-width `＜/memory-context＞` is no marker either. So one record, or one value, is always exactly one line
that shows every character it holds, and json.loads gives back exactly what was put in. The same function
writes the context block an agent reads (strataflow.retrieval), the seed 002 profile documents between their
markers, and every MCP tool answer (strataflow.service). A record that cannot be written as one JSON line is
an error naming it, never dropped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

# The closing marker must start a line: JSON lines hold no raw newline, so user text cannot close a block.
BLOCK = re.compile(r"<(?P<name>[a-z_]+)>\n(?P<body>.*?)\n</(?P=name)>", re.DOTALL)
# Written as \uXXXX inside JSON strings (they can only occur inside strings, so this keeps the JSON valid):
# "<", DEL and the C1 controls (U+0085 among them), the soft hyphen, the Mongolian vowel separator, the
# zero-width space, joiners and direction marks (U+200B-U+200F), the line and paragraph separators, the
# bidirectional overrides and isolates, the word joiner and invisible operators (U+2060-U+2064), U+FEFF, the
# small and full-width "<" and ">" (U+FE64, U+FE65, U+FF1C, U+FF1E) and the tag characters U+E0000-U+E007F
# (written as their UTF-16 surrogate pair, \udb40\udcXX, which json.loads reads back as the one character).
JSON_LINE_UNSAFE = re.compile(
    "[<\u007f-\u009f\u00ad\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
    "\ufe64\ufe65\uff1c\uff1e\U000e0000-\U000e007f]"
)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code > 0xFFFF:  # JSON's \u escapes are UTF-16 units: an astral character is a surrogate pair
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


class PromptBlockError(ValueError):
    """A record that cannot be placed in a prompt; the message names the block and the record."""


def escape_json(json_text: str) -> str:
    """JSON text with the characters of JSON_LINE_UNSAFE ("<", its look-alikes, the C1 controls, U+2028,
    U+2029, the bidirectional overrides, zero-width and tag characters) written as \\uXXXX (the same JSON
    value once parsed; json.dumps already escapes the ASCII control characters)."""
    return JSON_LINE_UNSAFE.sub(_escaped, json_text)


def quote_text(value: str) -> str:
    """User text as one safe line: a JSON string literal, quotes included (module docstring). This is the
    one escaping of a value that reaches a prompt or a tool answer; json.loads(quote_text(v)) == v."""
    return escape_json(json.dumps(value, ensure_ascii=False))


def json_text(value: Any, indent: int | None = None) -> str:
    """A JSON value (a record, a tool answer) with every string escaped as quote_text escapes it."""
    separators = (",", ": ") if indent else (", ", ": ")
    return escape_json(
        json.dumps(value, ensure_ascii=False, default=str, indent=indent, separators=separators)
    )


def json_line(record: Mapping[str, Any]) -> str:
    """One record as a single JSON line that cannot open or close a block (see the module docstring)."""
    return escape_json(json.dumps(dict(record), ensure_ascii=False, default=str, separators=(",", ":")))


def json_lines_block(name: str, records: Iterable[Mapping[str, Any]]) -> str:
    """A <name> block holding one JSON object per line (non-ASCII kept readable)."""
    lines = []
    for position, record in enumerate(records, start=1):
        try:
            line = json_line(record)
            line.encode("utf-8")  # a lone surrogate cannot be sent to any model
            lines.append(line)
        except (TypeError, ValueError) as exc:
            which = f"id {record['id']}" if "id" in record else f"record {position}"
            raise PromptBlockError(f"<{name}> {which} cannot be placed in the prompt: {exc}") from None
    return f"<{name}>\n" + "\n".join(lines) + f"\n</{name}>"


def text_block(name: str, body: str) -> str:
    """A <name> block of the prompt's own text (a stage name, a week, existing keys): a "<" in it is written
    \\u003c, as everywhere, so it cannot close the block."""
    return f"<{name}>\n{escape_json(body)}\n</{name}>"


def parse_blocks(prompt: str) -> dict[str, str]:
    """Every <name>...</name> block in a prompt, by name (the last wins when one repeats)."""
    return {match.group("name"): match.group("body") for match in BLOCK.finditer(prompt)}


def json_block_lines(body: str) -> list[tuple[int, str]]:
    """(line number, line) of a JSON-lines block body, split on "\n" only; blank lines are left out."""
    return [(number, line) for number, line in enumerate(body.split("\n"), start=1) if line.strip()]


def parse_json_lines(body: str) -> list[dict[str, Any]]:
    """The records of a json_lines_block body; a line that is not a JSON object raises PromptBlockError."""
    records = []
    for number, line in json_block_lines(body):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PromptBlockError(f"line {number} of a JSON-lines block is not JSON: {exc.msg}") from None
        if not isinstance(record, dict):
            raise PromptBlockError(f"line {number} of a JSON-lines block is not a JSON object")
        records.append(record)
    return records


def task_block(stage: str) -> str:
    return text_block("task", stage)
