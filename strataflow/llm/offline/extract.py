"""The extract stage of the offline provider: user messages in, ExtractionOutput items out.

Only role "user" messages are read (an assistant's question is not a fact). Each message is split into
sentences; every rule of its language (plus the language-neutral contact and team rules) runs on each
sentence; guards drop questions, negations, statements about someone else, plans (for facts) and the
past (for current facts); the clause that stated an item is its statement. Within one prompt the latest
message wins per (kind, key); list values (tools, target programs) are merged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from strataflow.llm.offline import rules_en, rules_en_life, rules_people, rules_team, rules_zh, rules_zh_life
from strataflow.llm.offline.text import Finding, guard_fails, is_chinese, sentences, statement_of

EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
PHONE_CONTEXT = re.compile(
    r"(?:电话|手机|手机号|联系方式|联系我|号码|phone|cell|mobile|number|call me|reach me|text me|whatsapp)"
    r"[^0-9+]{0,16}(?P<p>\+?\d[\d\s()-]{6,18}\d)",
    re.IGNORECASE,
)
CN_MOBILE = re.compile(r"(?<![\d])(?P<p>1[3-9]\d{9})(?![\d])")
INTL_PHONE = re.compile(r"(?<![\w+])(?P<p>\+\d{1,3}[\s-]?\(?\d{1,4}\)?(?:[\s-]?\d{2,4}){2,3})(?!\d)")
US_PHONE = re.compile(r"(?<![\w+-])(?P<p>\(?\d{3}\)?[\s.-]\d{3}[\s.-]\d{4})(?!\d)")
DEFAULT_IMPORTANCE = {
    "fact": 70,
    "preference": 60,
    "intent": 80,
    "decision": 75,
    "status": 65,
    "feedback": 55,
}
LIST_KEYS = frozenset({"tools", "skills", "target_programs", "languages"})
CONTACT_GUARDS = frozenset({"question", "others"})
ZH_RULES = (*rules_zh.RULES, *rules_zh_life.RULES)
EN_RULES = (*rules_en.RULES, *rules_en_life.RULES)
TEAM_RULES = (*rules_team.RULES, *rules_people.RULES)


def contact(sentence: str) -> Iterable[Finding]:
    for match in EMAIL.finditer(sentence):
        yield Finding("fact", "email", match.group(0), match.span(), category="basic", guards=CONTACT_GUARDS)
    seen: set[str] = set()
    for pattern in (PHONE_CONTEXT, INTL_PHONE, CN_MOBILE, US_PHONE):
        for match in pattern.finditer(sentence):
            digits = re.sub(r"[\s().-]", "", match.group("p"))
            if digits not in seen and len(re.sub(r"\D", "", digits)) >= 7:
                seen.add(digits)
                yield Finding(
                    "fact", "phone", digits, match.span("p"), category="basic", guards=CONTACT_GUARDS
                )


# "I'm <a name, an age or a title>," opens a list of facts about the speaker ("I'm off, Bo" does not).
SELF_INTRO = re.compile(
    r"^\W*(?:(?:hi|hello|hey)\W+)?(?P<lead>I'm|I am)\s+(?:[A-Z][a-z]+|\d{1,3}|an?\s+[\w -]+|married|"
    r"single)\s*,"
)


def _appositions(sentence: str) -> list[tuple[int, str]]:
    """For "I'm Emily, 31, a pharmacist": each comma part after the first read as its own "I'm <part>" clause.
    Returns (end of the part in the sentence, virtual sentence); the statement is the sentence up to there."""
    lead = SELF_INTRO.match(sentence)
    if not lead or "," not in sentence:
        return []
    parts: list[tuple[int, str]] = []
    for match in re.finditer(r",\s*(?P<part>[^,;]+)", sentence):
        part = match.group("part")
        if re.match(r"(?:and\s+)?(?:I|we|my|but|so|because)\b", part, re.IGNORECASE):
            break
        parts.append((match.end("part"), "I'm " + re.sub(r"^and\s+", "", part)))
    return parts


def findings_of_text(text: str) -> list[tuple[Finding, str]]:
    """Every finding that survives its guards in one message text, with its statement."""
    results: list[tuple[Finding, str]] = []
    for _, sentence in sentences(text):
        chinese = is_chinese(sentence)
        rules = ZH_RULES if chinese else EN_RULES
        seen: set[tuple[str, str]] = set()
        for rule in (*rules, contact, *TEAM_RULES):
            for finding in rule(sentence):
                if (finding.kind, finding.key) in seen or guard_fails(finding, sentence):
                    continue
                seen.add((finding.kind, finding.key))
                results.append((finding, statement_of(sentence, finding.span) or sentence.strip()))
        for end, virtual in [] if chinese else _appositions(sentence):
            for rule in (r for r in rules if r.__name__ != "name"):  # a later part is never the name
                for finding in rule(virtual):
                    if (finding.kind, finding.key) in seen or guard_fails(finding, virtual):
                        continue
                    seen.add((finding.kind, finding.key))
                    results.append((finding, sentence[:end].strip(" .!,")))
    return results


def _order(message: dict[str, Any]) -> tuple[str, int]:
    return (str(message.get("time") or ""), int(message.get("id") or 0))


def extract_items(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """ExtractionOutput items (as dicts) from the <messages> records of a prompt."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for message in sorted(messages, key=_order):
        if message.get("role") != "user" or not isinstance(message.get("text"), str):
            continue
        try:
            message_id = int(message["id"])
        except (KeyError, TypeError, ValueError):
            continue
        for finding, statement in findings_of_text(message["text"]):
            slot = (finding.kind, finding.key)
            item = {
                "kind": finding.kind,
                "key": finding.key,
                "value": finding.value,
                "statement": statement,
                "category": finding.category,
                "importance": DEFAULT_IMPORTANCE.get(finding.kind, 50),
                "confidence": round(finding.confidence * (0.85 if finding.approximate else 1.0), 2),
                "approximate": finding.approximate,
                "source_message_ids": [message_id],
            }
            previous = merged.get(slot)
            if previous is not None and finding.key in LIST_KEYS and isinstance(finding.value, list):
                values = list(previous["value"]) + [v for v in finding.value if v not in previous["value"]]
                item["value"] = values
                item["statement"] = f"{previous['statement']}; {statement}"
            if previous is not None and (item["value"] == previous["value"] or finding.key in LIST_KEYS):
                ids = previous["source_message_ids"] + [message_id]
                item["source_message_ids"] = list(dict.fromkeys(ids))
            merged[slot] = item
    return list(merged.values())
