"""English rules for family, name, tools, immigration plans, intents and preferences (see rules_en)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from strataflow.llm.offline import aliases
from strataflow.llm.offline.numbers import EN_NUMBER, parse_quantity
from strataflow.llm.offline.patterns_en import CHANNELS, HOLD_CUE, IGNORE, INTENT_CUE, TIMELINE
from strataflow.llm.offline.rules_en import _find
from strataflow.llm.offline.rules_zh_life import language_scores  # test names are language-neutral
from strataflow.llm.offline.text import INTENT_GUARDS, Finding, slug

Rule = Callable[[str], Iterator[Finding]]


def family(sentence: str) -> Iterator[Finding]:
    guards = frozenset({"question", "others"})
    for match in _find(
        r"\b(?:I|we)(?:'m| am|'re| are| got| just got|'ve been| have been)\s+(?:happily\s+|recently\s+|"
        r"newly\s+|now\s+)?"
        r"(?P<s>married|single|divorced|engaged|widowed|separated)\b",
        sentence,
        IGNORE,
    ):
        yield Finding(
            "fact", "marital_status", match.group("s").lower(), match.span(), category="family", guards=guards
        )
    for match in _find(r"\bI(?:'m| am)\s+not\s+married\b", sentence, IGNORE):
        yield Finding("fact", "marital_status", "not married", match.span(), category="family", guards=guards)
    count_word = rf"(?:\d+|{EN_NUMBER}|an?|one)"
    kid = (
        r"(?:young\s+|little\s+|small\s+|grown\s+|adult\s+|teenage\s+)?(?:kids?|children|child|sons?|"
        r"daughters?|boys?|girls?)"
    )
    for match in _find(
        rf"(?:\b(?:I|we)(?:\s+|(?='))(?:have|'ve got|have got|got|also have)\s+|\b(?:married|divorced|single|"
        rf"I'm|I am)\b[^.;!?]{{0,30}}?\bwith\s+)(?P<list>{count_word}\s+{kid}"
        rf"(?:\s*(?:,|and)\s*{count_word}\s+{kid})*)",
        sentence,
        IGNORE,
    ):
        total = 0
        for part in re.finditer(rf"(?P<n>{count_word})\s+{kid}", match.group("list"), IGNORE):
            word = part.group("n").lower()
            quantity = 1 if word in ("a", "an", "one") else parse_quantity(word)
            total += (
                quantity
                if isinstance(quantity, int)
                else (quantity.value if quantity and isinstance(quantity.value, int) else 0)
            )
        if total:
            yield Finding("fact", "children", total, match.span(), category="family", guards=guards)
    for match in _find(rf"\b(?:our|my)\s+(?P<n>\d+|{EN_NUMBER})\s+{kid}\b", sentence, IGNORE):
        quantity = parse_quantity(match.group("n"))
        if quantity and isinstance(quantity.value, int):
            yield Finding("fact", "children", quantity.value, match.span(), category="family", guards=guards)
    for match in _find(
        r"\b(?:I|we)(?:\s+|(?='))(?:have|'ve got|have got|got)\s+(?:a\s+(?:set of\s+)?)?twins?\b|"
        r"\btwin\s+(?:boys|girls|sons|daughters)\b",
        sentence,
        IGNORE,
    ):
        yield Finding("fact", "children", 2, match.span(), category="family", guards=guards)
    parent_of = rf"\b(?:mom|mother|dad|father|parent)\s+of\s+(?P<n>\d+|{EN_NUMBER})\b"
    for match in _find(parent_of, sentence, IGNORE):
        quantity = parse_quantity(match.group("n"))
        if quantity and isinstance(quantity.value, int):
            yield Finding("fact", "children", quantity.value, match.span(), category="family", guards=guards)
    for match in _find(
        r"\b(?:no kids|no children|(?:don't|do not) have (?:any )?(?:kids|children)|childless)\b",
        sentence,
        IGNORE,
    ):
        yield Finding(
            "fact", "children", 0, match.span(), category="family", guards=frozenset({"question", "others"})
        )


NAME = r"(?P<n>[A-Z][a-z]+(?:[ -][A-Z][a-z]+){0,2})"
NOT_NAMES = frozenset(
    "Good Fine Ok Okay Sorry Back Here Done Ready Sure Interested Happy Glad Not Just Still Also Currently "
    "Now "
    "Married Single Divorced Chinese American British Canadian Indian Japanese Korean French German "
    "Australian "
    "Looking Trying Planning Thinking Going Working Living Based From In At On The A An So Very Really "
    "Excited "
    "Curious Confused Tired Busy New Available Free Late Early Originally".split()
)


def name(sentence: str) -> Iterator[Finding]:
    patterns = (
        rf"\b(?i:my name(?:'s| is))\s+{NAME}",
        rf"(?:^|[,.!]\s*)(?:(?i:hi|hello|hey)[,!]?\s+)?{NAME}\s+here\b",
        rf"\b(?i:call me|I go by|(?:people|everyone|everybody|friends|my friends|most people)\s+calls?\s+me)"
        rf"\s+{NAME}",
        rf"(?:^|[,.!]\s*|\b(?:hi|hello|hey)[,!]?\s+)(?:this is|I'm|I am)\s+{NAME}(?=\s*[,.!]|\s+(?:here|"
        rf"from|speaking)\b|$)",
    )
    for pattern in patterns:
        for match in _find(pattern, sentence):
            value = match.group("n")
            if value.split()[0] in NOT_NAMES:
                continue
            yield Finding(
                "fact",
                "name",
                value,
                match.span("n"),
                category="basic",
                guards=frozenset({"question", "negation"}),
            )


def tools(sentence: str) -> Iterator[Finding]:
    cue = re.search(
        r"\b(use|using|used|work with|working with|worked with|know|proficient in|experienced with|"
        r"experience with|familiar with|skilled in|expert in|fluent in|write|writing|code in|coding in|"
        r"program in|stack|tools?|rely on|built (?:it |this )?(?:with|on|in)|run on|runs on|running on)\b",
        sentence,
        IGNORE,
    )
    names = aliases.tech_in(sentence[cue.start() :]) if cue else []
    everywhere = aliases.tech_in(sentence)
    if aliases.versioned(
        everywhere
    ):  # "We just moved to PostgreSQL 17": a version names a tool, no cue needed
        names, cue = everywhere, None
    if names:
        start = cue.start() if cue else sentence.find(names[0].split()[0])
        yield Finding("fact", "tools", names, (max(start, 0), len(sentence.rstrip(". !"))), category="career")
    for match in _find(
        r"\b(?:good at|skilled at|great at|strong in|my skills include|I specialize in|"
        r"specialize in|expertise in)\s+(?P<s>[a-z][\w -]{2,40}?)(?=[,.;!]|$|\s+and\b)",
        sentence,
        IGNORE,
    ):
        if not aliases.tech_in(match.group("s")):
            yield Finding("fact", "skills", [match.group("s").strip()], match.span("s"), category="career")


def immigration(sentence: str) -> Iterator[Finding]:
    programs = aliases.programs_in(sentence)
    if programs:
        held, wanted = HOLD_CUE.search(sentence), INTENT_CUE.search(sentence)
        if held and not wanted:
            yield Finding(
                "fact", "current_visa", programs[0], (held.start(), len(sentence)), category="immigration"
            )
        elif wanted:
            yield Finding(
                "intent",
                "target_programs",
                programs,
                (wanted.start(), len(sentence)),
                category="immigration",
                guards=INTENT_GUARDS,
            )
    if programs or re.search(r"\b(move|relocat\w*|immigrat\w*|emigrat\w*|apply\w*)\b", sentence, IGNORE):
        match = TIMELINE.search(sentence)
        if match and (programs or INTENT_CUE.search(sentence)):
            yield Finding(
                "intent",
                "timeline",
                match.group(0),
                match.span(),
                category="immigration",
                guards=INTENT_GUARDS,
            )


INTENT_SKIP = re.compile(
    r"^(know|ask|check|learn more|understand|confirm|clarify|say|thank|mention|add|share|"
    r"talk|discuss|make sure|see)\b",
    IGNORE,
)


def intents(sentence: str) -> Iterator[Finding]:
    if aliases.programs_in(sentence):
        return
    pattern = (
        r"\b(?:I|we)(?:\s+|(?='))(?:really\s+|also\s+|definitely\s+)?(?:want to|wanna|would like to|'d like "
        r"to|'d "
        r"love to|would love to|plan to|"
        r"am planning to|'m planning to|are planning to|'re planning to|intend to|hope to|am hoping to|"
        r"'m hoping to|aim to|am thinking of|'m thinking of|am considering|'m considering|am looking to|"
        r"'m looking to)\s+(?P<x>[^,.;!?]{3,60})"
    )
    for match in _find(pattern, sentence, IGNORE):
        phrase = match.group("x").strip()
        if INTENT_SKIP.match(phrase) or re.match(r"(be|have|get back|let you|send|reply)\b", phrase, IGNORE):
            continue
        yield Finding("intent", f"intent_{slug(phrase, 3)}", phrase, match.span(), guards=INTENT_GUARDS)


def _preference_topic(text: str) -> str:
    lowered = text.lower()
    if any(re.search(rf"\b{re.escape(word)}\b", lowered) for word in CHANNELS):
        return "contact_method"
    if re.search(r"\b(morning|afternoon|evening|weekend|weekday|night)s?\b", lowered):
        return "contact_time"
    if re.search(r"\b(english|chinese|mandarin|cantonese|spanish|french)\b", lowered):
        return "language"
    return slug(text, 2)


def preferences(sentence: str) -> Iterator[Finding]:
    guards = frozenset({"question", "others"})
    pattern = (
        r"\bI\s*(?:really\s+|much\s+|generally\s+|usually\s+|definitely\s+|strongly\s+|always\s+)?"
        r"(?P<v>prefer|like|love|enjoy|favou?r|hate|dislike|can't stand|don't like|do not like|would rather|"
        r"'d rather)\s+(?P<x>[^,.;!?]{2,60})"
    )
    for match in _find(pattern, sentence, IGNORE):
        verb, obj = match.group("v").lower(), match.group("x").strip()
        if re.fullmatch(r"(?:it|that|this|them|those|these|one)", obj, IGNORE):
            continue  # "I prefer that": the thing is in another sentence, nothing explicit here
        if verb in ("like", "love", "hate", "dislike", "don't like", "do not like") and re.match(
            r"(the|this|that|your|it|how)\b", obj, IGNORE
        ):
            continue  # an opinion about a thing is feedback, not a standing preference
        if verb in ("like", "love", "enjoy") and re.match(r"to\s", obj):
            obj = obj[3:]
        parts = re.split(r"\s+(?:over|rather than|instead of|than|to)\s+", obj, maxsplit=1, flags=IGNORE)
        negative = verb in ("hate", "dislike", "can't stand", "don't like", "do not like")
        value: dict[str, Any] = {"dislikes": parts[0]} if negative else {"prefers": parts[0]}
        if (
            len(parts) > 1
            and not negative
            and verb in ("prefer", "would rather", "'d rather", "favor", "favour")
        ):
            value["over"] = parts[1]
        elif len(parts) > 1:
            value = {"dislikes": obj} if negative else {"prefers": obj}
        yield Finding(
            "preference", f"preference_{_preference_topic(obj)}", value, match.span(), guards=guards
        )
    for match in _find(
        r"\b(?P<x>email|e-mail|phone|calls?|texts?|whatsapp|wechat|slack|zoom)\s+(?:works best|is best|"
        r"is better|is preferred|is easiest)(?:\s+for me)?\b",
        sentence,
        IGNORE,
    ):
        yield Finding(
            "preference",
            "preference_contact_method",
            {"prefers": match.group("x")},
            match.span(),
            guards=guards,
        )


RULES: tuple[Rule, ...] = (family, name, tools, immigration, intents, preferences, language_scores)
