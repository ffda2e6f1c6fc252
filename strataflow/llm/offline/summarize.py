"""The rollup, reflect and hot_summary stages of the offline provider: extractive, never invented.

- rollup: a Markdown weekly report of the <messages> block (who spoke and how much, the days covered, the
  key events, the most informative user sentences) and, as the rollup prompt asks of any model, its key
  events each with the ids of the messages behind it: the items the extract rules find (decisions, status,
  profile facts, intents), then each of those user sentences. The summary cites no ids: like a model's,
  it is text, and the ids travel in `key_events[].message_ids` only.
- reflect: one insight per attribute (key) of the <memories> block: a question ("What is the user's
  job title?"), a statement from the newest value, a confidence that grows with agreeing evidence, and the
  ids of the memories behind it.
- hot_summary: the latest user sentences and counts of the last messages, with their ids.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from models.vocabulary import SNAKE_KEY
from strataflow.llm.offline.extract import extract_items
from strataflow.llm.offline.text import sentences
from strataflow.textsearch import CJK

MAX_HIGHLIGHTS = 8
MAX_EVENTS = 12
SENTENCE_CHARS = 200
EVENT_KINDS = ("decision", "status", "intent", "feedback", "fact", "preference")
QUESTION_NAMES = {
    "age": "age",
    "education": "education level",
    "university": "university",
    "major": "major",
    "job_title": "job title",
    "company": "employer",
    "years_of_experience": "years of work experience",
    "annual_income": "annual income",
    "monthly_income": "monthly income",
    "location": "current city",
    "hometown": "hometown",
    "marital_status": "marital status",
    "children": "number of children",
    "name": "name",
    "phone": "phone number",
    "email": "email address",
    "tools": "tools and technologies",
    "skills": "skills",
    "target_programs": "target immigration programs",
    "timeline": "timeline",
    "budget": "budget",
    "industry": "industry",
    "current_visa": "current visa",
    "target_city": "target city",
}


def _id(record: dict[str, Any]) -> int | None:
    try:
        return int(record["id"])
    except (KeyError, TypeError, ValueError):
        return None


def _clip(text: str, limit: int = SENTENCE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _informative_sentences(messages: list[dict[str, Any]]) -> list[tuple[int, str, int]]:
    """(message id, sentence, score) of user sentences, scored by content words and digits; no greetings."""
    scored: list[tuple[int, str, int]] = []
    for record in messages:
        message_id, text = _id(record), record.get("text")
        if message_id is None or record.get("role") != "user" or not isinstance(text, str):
            continue
        for _, sentence in sentences(text):
            clean = sentence.strip()
            words = re.findall(rf"[A-Za-z]{{3,}}|[{CJK}]", clean)
            score = len(set(words)) + 3 * len(re.findall(r"\d", clean)) // 2
            if len(words) >= 4 and not clean.endswith(("?", "？")):
                scored.append((message_id, clean, score))
    return scored


def _event_text(item: dict[str, Any]) -> str:
    value = item["value"]
    if isinstance(value, dict):
        value = ", ".join(f"{k}: {v}" for k, v in value.items() if v not in (None, ""))
    elif isinstance(value, list):
        value = ", ".join(str(v) for v in value)
    label = item["key"].replace("_", " ")
    return f'{item["kind"]} — {label}: {value} ("{_clip(item["statement"], 120)}")'


def key_events(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events found by the extract rules, most important kinds first, each with its message ids."""
    items = extract_items(messages)
    items.sort(key=lambda item: EVENT_KINDS.index(item["kind"]) if item["kind"] in EVENT_KINDS else 99)
    return [
        {"event": _event_text(item), "message_ids": item["source_message_ids"]} for item in items[:MAX_EVENTS]
    ]


def rollup(messages: list[dict[str, Any]], week: str | None = None) -> dict[str, Any]:
    """RollupOutput as a dict: a Markdown summary, and key events with message ids (the rule events, then
    the informative user sentences, each resting on its own message)."""
    valid = [m for m in messages if _id(m) is not None]
    roles = Counter(str(m.get("role") or "unknown") for m in valid)
    speakers = Counter(str(m["speaker"]) for m in valid if m.get("speaker"))
    days = sorted({str(m.get("time") or "")[:10] for m in valid if m.get("time")})
    lines = [f"## Weekly summary{f' ({week.strip()})' if week else ''}", ""]
    counts = ", ".join(f"{count} {role}" for role, count in sorted(roles.items()))
    span = f" between {days[0]} and {days[-1]}" if days else ""
    lines.append(f"{len(valid)} messages ({counts or 'none'}){span}.")
    if speakers:
        lines.append(
            "Speakers: " + ", ".join(f"{name} ({count})" for name, count in speakers.most_common(8)) + "."
        )
    events = key_events(valid)
    if events:
        lines += ["", "### Key events"] + [f"- {event['event']}" for event in events]
    highlights = sorted(_informative_sentences(valid), key=lambda row: -row[2])[:MAX_HIGHLIGHTS]
    if highlights:
        order = {(_id(m)): i for i, m in enumerate(valid)}
        highlights.sort(key=lambda row: order.get(row[0], 0))
        lines += ["", "### What the user said"] + [f"- {_clip(text)}" for _, text, _ in highlights]
    said = [{"event": f"user: {_clip(text, 160)}", "message_ids": [mid]} for mid, text, _ in highlights]
    return {"summary": "\n".join(lines), "key_events": events + said}


def _value_text(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items() if v not in (None, ""))
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def _question(key: str, kind: str) -> str:
    if key in QUESTION_NAMES:
        return f"What is the user's {QUESTION_NAMES[key]}?"
    for prefix, template in (
        ("decision_", "What was decided about {}?"),
        ("status_", "What is the status of {}?"),
        ("preference_", "What does the user prefer regarding {}?"),
        ("feedback_", "What feedback did the user give on {}?"),
        ("person_", "Who is {} and what is their role?"),
        ("intent_", "What does the user intend regarding {}?"),
    ):
        if key.startswith(prefix):
            return template.format(key[len(prefix) :].replace("_", " "))
    return f"What is known about the user's {key.replace('_', ' ')} ({kind})?"


def reflect(memories: list[dict[str, Any]]) -> dict[str, Any]:
    """ReflectionOutput as a dict: one insight per key, from its newest memory."""
    by_key: dict[str, list[dict[str, Any]]] = {}
    for memory in memories:
        key, memory_id = memory.get("key"), _id(memory)
        if not isinstance(key, str) or not SNAKE_KEY.match(key) or memory_id is None:
            continue
        if memory.get("kind") == "hot_summary":
            continue
        by_key.setdefault(key, []).append(memory)
    insights = []
    for key, group in by_key.items():
        group.sort(key=lambda m: (str(m.get("time") or ""), _id(m) or 0))
        newest = group[-1]
        agreeing = sum(
            1
            for m in group
            if json.dumps(m.get("value"), sort_keys=True, ensure_ascii=False)
            == json.dumps(newest.get("value"), sort_keys=True, ensure_ascii=False)
        )
        label = QUESTION_NAMES.get(key, key.replace("_", " "))
        statement = f"The user's {label} is {_value_text(newest.get('value'))}"
        if newest.get("statement"):
            statement += f' ("{_clip(str(newest["statement"]), 160)}")'
        if len(group) > agreeing:
            statement += f"; it changed {len(group) - agreeing} time(s), the newest value wins"
        confidence = min(0.95, 0.6 + 0.1 * agreeing)
        insights.append(
            {
                "key": key,
                "question": _question(key, str(newest.get("kind") or "fact")),
                "statement": statement + ".",
                "confidence": round(confidence, 2),
                "evidence_item_ids": [_id(m) for m in group],
            }
        )
    return {"insights": insights}


def hot_summary(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """HotSummaryOutput as a dict: counts, then the latest informative user sentences, with their ids."""
    valid = [m for m in messages if _id(m) is not None]
    if not valid:
        return {"summary": "No recent messages.", "source_message_ids": []}
    roles = Counter(str(m.get("role") or "unknown") for m in valid)
    latest = _informative_sentences(valid)[-5:]
    lines = [f"Last {len(valid)} messages ({', '.join(f'{c} {r}' for r, c in sorted(roles.items()))})."]
    items = extract_items(valid)
    state = [
        f"{item['key'].replace('_', ' ')}: {_value_text(item['value'])}"
        for item in items
        if item["kind"] in ("status", "decision", "intent")
    ][:5]
    if state:
        lines.append("Current: " + "; ".join(state) + ".")
    lines += [f"- {_clip(text, 160)}" for _, text, _ in latest]
    ids = list(
        dict.fromkeys(
            [mid for mid, _, _ in latest] + [i for item in items for i in item["source_message_ids"]]
        )
    )
    if not ids:
        ids = [_id(valid[-1])]
        last_text = valid[-1].get("text")
        lines.append(f"- {valid[-1].get('role')}: {_clip(str(last_text or ''), 160)}")
    typed = [item for item in items if item["kind"] in ("status", "decision", "preference")]
    return {"summary": "\n".join(lines), "source_message_ids": ids, "items": typed}
