"""The extract stage of the offline provider: user messages in, ExtractionOutput items out.

Facts come only from role "user" messages (an assistant's question or guess is never a fact); an assistant
turn is read as context only, so a bare answer to its question ("How old are you?" - "41") is understood
(context.py). Each message is split into sentences; every rule of its language (plus the language-neutral
contact and team rules) runs on each sentence; guards drop questions, negations, statements about someone
else, plans (for facts) and the past (for current facts); the clause that stated an item is its statement.
A colon-led list ("About me: 38, married, two kids") and labelled lines ("Location: Austin") are read part
by part (lists.py). Within one prompt the latest message wins per (kind, key); list values (tools, target
programs, family members) are merged; a weak finding (said in passing) never replaces a stated one nor a
key listed in <existing_keys>.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any

from models.vocabulary import program_category
from strataflow.llm.offline import (
    context,
    lists,
    rules_comm,
    rules_en,
    rules_en_life,
    rules_family,
    rules_health,
    rules_household,
    rules_likes,
    rules_money,
    rules_people,
    rules_profile,
    rules_team,
    rules_zh,
    rules_zh_life,
)
from strataflow.llm.offline.text import (
    Finding,
    continues_someone_else,
    guard_fails,
    is_chinese,
    relative_topic,
    sentences,
    statement_of,
)

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
LIST_KEYS = frozenset(
    {"tools", "skills", "target_programs", "languages", "family_members", "pets", "allergies", "food_avoid"}
)
CONTACT_GUARDS = frozenset({"question", "others"})
ZH_RULES = (
    *rules_zh.RULES,
    *rules_profile.ZH_RULES,
    *rules_money.ZH_RULES,
    *rules_comm.ZH_RULES,
    *rules_zh_life.RULES,
    *rules_family.ZH_RULES,
    *rules_household.ZH_RULES,
    *rules_health.ZH_RULES,
    *rules_likes.ZH_RULES,
)
EN_RULES = (
    *rules_en.RULES,
    *rules_profile.EN_RULES,
    *rules_money.EN_RULES,
    *rules_comm.EN_RULES,
    *rules_en_life.RULES,
    *rules_family.EN_RULES,
    *rules_household.EN_RULES,
    *rules_health.EN_RULES,
    *rules_likes.EN_RULES,
)
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


def _run(
    rules: tuple[Callable[[str], Iterable[Finding]], ...],
    text: str,
    seen: set[tuple[str, str]],
    statement: str | None,
) -> list[tuple[Finding, str]]:
    """Every finding of rules on one (possibly virtual) sentence that survives its guards."""
    results: list[tuple[Finding, str]] = []
    for rule in rules:
        for finding in rule(text):
            if (finding.kind, finding.key) in seen or guard_fails(finding, text):
                continue
            if finding.key == "age" and relative_topic(text, finding.span):
                continue  # 我有个儿子，今年三岁: the age is the son's
            if "others" in finding.guards and continues_someone_else(text, finding.span):
                continue  # 我姐姐叫王丽，在广州当护士: the job is the sister's
            seen.add((finding.kind, finding.key))
            results.append((finding, statement or statement_of(text, finding.span) or text.strip()))
    return results


def findings_of_text(text: str) -> list[tuple[Finding, str]]:
    """Every finding that survives its guards in one message text, with its statement."""
    results: list[tuple[Finding, str]] = []
    for _, sentence in sentences(text):
        chinese = is_chinese(sentence)
        rules = ZH_RULES if chinese else EN_RULES
        seen: set[tuple[str, str]] = set()
        results += _run((*rules, contact, *TEAM_RULES), sentence, seen, None)
        no_name = tuple(r for r in rules if r.__name__ != "name")  # a later part is never the name
        for statement, virtual in lists.parts(sentence):
            results += _run(no_name, virtual, seen, statement)
    return results


def _order(message: dict[str, Any]) -> tuple[str, int]:
    return (str(message.get("time") or ""), int(message.get("id") or 0))


def _category(finding: Finding) -> str | None:
    """Program items carry the seed 000 program category (TTPS, QMAS, ...) when one program is named."""
    if finding.key in ("target_programs", "current_visa"):
        programs = finding.value if isinstance(finding.value, list) else [finding.value]
        categories = [c for c in (program_category(str(p)) for p in programs) if c]
        if categories:
            return categories[0]
    return finding.category


def extract_items(
    messages: list[dict[str, Any]], existing_keys: frozenset[str] | set[str] = frozenset()
) -> list[dict[str, Any]]:
    """ExtractionOutput items (as dicts) from the <messages> records of a prompt; existing_keys are the
    "kind:key" pairs of <existing_keys> (a weak finding never replaces one)."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    weak: set[tuple[str, str]] = set()
    asked = ""
    for message in sorted(messages, key=_order):
        text = message.get("text")
        if message.get("role") != "user" or not isinstance(text, str):
            asked = text if message.get("role") == "assistant" and isinstance(text, str) else ""
            continue
        try:
            message_id = int(message["id"])
        except (KeyError, TypeError, ValueError):
            continue
        found = findings_of_text(text) or [
            (finding, text.strip())
            for finding, _ in findings_of_text(context.answer_as_statement(asked, text))
        ]
        asked = ""
        for finding, statement in found:
            slot = (finding.kind, finding.key)
            previous = merged.get(slot)
            if finding.weak and (
                f"{finding.kind}:{finding.key}" in existing_keys or previous and slot not in weak
            ):
                continue  # said in passing: never replaces a stated or stored value
            item = {
                "kind": finding.kind,
                "key": finding.key,
                "value": finding.value,
                "statement": statement,
                "category": _category(finding),
                "importance": DEFAULT_IMPORTANCE.get(finding.kind, 50),
                "confidence": round(
                    finding.confidence * (0.85 if finding.approximate or finding.weak else 1.0), 2
                ),
                "approximate": finding.approximate,
                "source_message_ids": [message_id],
            }
            if previous is not None and finding.key in LIST_KEYS and isinstance(finding.value, list):
                values = list(previous["value"]) + [v for v in finding.value if v not in previous["value"]]
                item["value"] = values
                item["statement"] = f"{previous['statement']}; {statement}"
            if previous is not None and (item["value"] == previous["value"] or finding.key in LIST_KEYS):
                ids = previous["source_message_ids"] + [message_id]
                item["source_message_ids"] = list(dict.fromkeys(ids))
            merged[slot] = item
            (weak.add if finding.weak else weak.discard)(slot)
    return list(merged.values())
