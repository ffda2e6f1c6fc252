"""How user content is put inside prompts, and read back by the offline provider.

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
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

# The closing marker must start a line: JSON lines hold no raw newline, so user text cannot close a block.
BLOCK = re.compile(r"<(?P<name>[a-z_]+)>\n(?P<body>.*?)\n</(?P=name)>", re.DOTALL)


def json_lines_block(name: str, records: Iterable[Mapping[str, Any]]) -> str:
    """A <name> block holding one JSON object per line (non-ASCII kept readable)."""
    lines = [
        json.dumps(dict(record), ensure_ascii=False, default=str, separators=(",", ":")) for record in records
    ]
    return f"<{name}>\n" + "\n".join(lines) + f"\n</{name}>"


def text_block(name: str, body: str) -> str:
    return f"<{name}>\n{body}\n</{name}>"


def parse_blocks(prompt: str) -> dict[str, str]:
    """Every <name>...</name> block in a prompt, by name (the last wins when one repeats)."""
    return {match.group("name"): match.group("body") for match in BLOCK.finditer(prompt)}


def parse_json_lines(body: str) -> list[dict[str, Any]]:
    """The records of a json_lines_block body; blank lines are skipped."""
    return [json.loads(line) for line in body.splitlines() if line.strip()]


def task_block(stage: str) -> str:
    return text_block("task", stage)
