"""English extraction rules: one function per field, each returning Findings for one sentence.

Patterns are general (a verb or marker, then the value), built from the fragments and word tables in
patterns_en. Numbers go through numbers.parse_quantity (word numbers, k/million units, ranges kept as
strings), names through the alias dictionary.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from strataflow.llm.offline import aliases
from strataflow.llm.offline.numbers import EN_NUMBER, decade_phrase, parse_quantity
from strataflow.llm.offline.patterns_en import (
    DEGREE,
    DEGREE_VALUE,
    IGNORE,
    MAJOR_ALIASES,
    NOT_PLACES,
    ORG,
    PLACE,
    SCHOOL_CONTEXT,
    TITLE,
    TITLE_NOUN,
    WORK_CONTEXT,
    Q,
)
from strataflow.llm.offline.text import CURRENT_FACT_GUARDS, INTENT_GUARDS, Finding

Rule = Callable[[str], Iterator[Finding]]


def _find(pattern: str, sentence: str, flags: int = 0) -> Iterator[re.Match[str]]:
    return re.finditer(pattern, sentence, flags)


def age(sentence: str) -> Iterator[Finding]:
    stop = (
        r"(?=\s*(?:years?\s+old|yrs?\s+old|y/?o\b|[,.;!?)]|$|\s+(?:and|but|now|this|next|so|with|soon|"
        r"today)\b))"
    )
    patterns = (
        rf"\bI(?:'m| am)\s+(?:now\s+|currently\s+)?(?P<q>{Q}){stop}",
        rf"\b(?P<q>{Q})\s*(?:(?:years?|yrs?)[\s-]*old\b|y/o\b|yo\b)",
        rf"\b(?P<q>\d{{1,3}}|{EN_NUMBER})-year-old\b",
        rf"(?:\b(?:my age is|age:|aged|I turned|I just turned)|^\s*(?:just\s+)?turned)\s+(?P<q>{Q})\b",
    )
    for pattern in patterns:
        for match in _find(pattern, sentence, IGNORE):
            quantity = parse_quantity(match.group("q"))
            if quantity is None or (
                isinstance(quantity.value, int | float) and not 10 <= quantity.value <= 110
            ):
                continue
            yield Finding("fact", "age", quantity.value, match.span(), quantity.approximate, category="basic")
    for match in _find(
        r"\bI(?:'m| am)\s+(?:in\s+(?:my\s+)?)?(?P<d>(?:early|mid|late)?[\s-]*(?:twenties|thirties|forties|"
        r"fifties|sixties|seventies|[2-9]0'?s))\b",
        sentence,
        IGNORE,
    ):
        yield Finding("fact", "age", decade_phrase(match.group("d")), match.span(), category="basic")


def education(sentence: str) -> Iterator[Finding]:
    if not re.search(
        r"\b(have|hold|got|earned|completed|finished|graduated|did|doing|with|degree|from|in|"
        r"studied|received|am|'m)\b",
        sentence,
        IGNORE,
    ):
        return
    best: tuple[int, re.Match[str]] | None = None
    for match in DEGREE.finditer(sentence):
        word = (match.group("d") or match.group("d2")).lower()
        rank = next((i for i, (prefix, _) in enumerate(DEGREE_VALUE) if word.startswith(prefix)), None)
        if rank is not None and (best is None or rank < best[0]):
            best = (rank, match)
    if best:
        yield Finding("fact", "education", DEGREE_VALUE[best[0]][1], best[1].span(), category="career")


def university(sentence: str) -> Iterator[Finding]:
    hits: list[tuple[int, int, str]] = []
    for match in aliases.UNIVERSITY_EN_ALIAS.finditer(sentence):
        hits.append((match.start(), match.end(), aliases.university_name(match.group(0))))
    full = (
        r"\b(?:University of [A-Z][\w]+(?:(?:\s+|,\s*)(?:at\s+)?[A-Z][\w]+)*|"
        r"(?:[A-Z][\w.&'-]*\s+){1,4}(?:University|College|Institute of Technology|Polytechnic))\b"
    )
    for match in _find(full, sentence):
        name = re.sub(r"^(?:The|the|I|My|A)\s+", "", match.group(0))
        if not any(s <= match.start() < e for s, e, _ in hits):
            hits.append((match.end() - len(name), match.end(), aliases.university_name(name)))
    for match in _find(
        r"\b(?:degree|MBA|PhD|Ph\.D\.?|master'?s|masters|bachelor'?s|bachelors|BSc|MSc|BA|BS|MS|MA|"
        r"doctorate|diploma)\b[^.;!?]*?\bfrom\s+(?:the\s+)?" + ORG,
        sentence,
    ):
        if not any(s <= match.start("c") < e for s, e, _ in hits):
            hits.append((match.start("c"), match.end("c"), aliases.university_name(match.group("c"))))
    for start, end, name in hits:
        if WORK_CONTEXT.search(sentence[:start]) and not SCHOOL_CONTEXT.search(sentence):
            yield Finding(
                "fact", "company", name, (start, end), category="career", guards=CURRENT_FACT_GUARDS
            )
        elif SCHOOL_CONTEXT.search(sentence):
            yield Finding("fact", "university", name, (start, end), category="career")


def _major_value(text: str) -> str:
    text = re.sub(r"^(?:the\s+)", "", text.strip(), flags=IGNORE)
    return MAJOR_ALIASES.get(text.lower(), text)


def major(sentence: str) -> Iterator[Finding]:
    end = r"(?=\s+(?:at|from|and|with|in\s+(?:19|20)\d\d|back|when|during|before|after|but)\b|[,.;!?)]|$)"
    patterns = (
        rf"\b(?:majored|major(?:ing)?|specialized|specializing|concentrat(?:ed|"
        rf"ing))\s+in\s+(?P<m>[A-Za-z][A-Za-z &-]{{1,40}}?){end}",
        rf"\b(?:degree|master'?s|masters|bachelor'?s|bachelors|PhD|Ph\.D\.?|MSc|BSc|MS|BS|BA|MA|MEng|MBA|doctorate)\s+"
        rf"(?:degree\s+)?in\s+(?P<m>[A-Za-z][A-Za-z &-]{{1,40}}?){end}",
        r"\bstudied\s+(?!at\b|in\b|abroad\b|hard\b|there\b|here\b)(?P<m>[A-Za-z][A-Za-z "
        r"&-]{1,40}?)(?=\s+(?:at|in college|in school|at university|"
        r"for)\b|[,.;!?]|$)",
        r"\b(?:an?|the)\s+(?P<m>[A-Za-z]+(?:\s+[A-Za-z]+)?)\s+major\b",
    )
    for pattern in patterns:
        for match in _find(pattern, sentence, IGNORE):
            value = _major_value(match.group("m"))
            if value and value.lower() not in ("a", "the", "it", "there", "abroad", "hard"):
                yield Finding("fact", "major", value, match.span("m"), category="career")


def job_title(sentence: str) -> Iterator[Finding]:
    patterns = (
        rf"\bI(?:'m| am)\s+(?:currently\s+|now\s+|also\s+|still\s+)?(?:an?|the)\s+(?:(?:\d+|"
        rf"{EN_NUMBER})[\s-]years?[\s-]old\s+)?"
        rf"{TITLE}\b",
        r"\b(?:work|working|works|employed)\s+as\s+(?:an?\s+|the\s+)?(?P<t>[A-Za-z/+&-]+(?:\s+[A-Za-z/+&-]+){0,4}?)"
        r"(?=\s+(?:at|for|in|with|on|since|and)\b|[,.;!?]|$)",
        r"\bmy (?:job|role|title|position|job title) is\s+(?:an?\s+|"
        r"the\s+)?(?P<t>[A-Za-z/+&-]+(?:\s+[A-Za-z/+&-]+){0,4}?)"
        r"(?=\s+(?:at|for|in|with|on)\b|[,.;!?]|$)",
        rf"\bI(?:'ve| have)\s+been\s+(?:an?\s+)?{TITLE}\s+for\b",
        rf"\bI(?:'m| am)\s+(?:an?\s+)?{TITLE}\s+by\s+(?:trade|profession|training)\b",
        r"\b(?:work|working|works)\s+(?:at|for|in)\s+[^,.;!?]{2,40}?\s+as\s+(?:an?\s+|the\s+)?"
        r"(?P<t>[A-Za-z/+&-]+(?:\s+[A-Za-z/+&-]+){0,4}?)(?=\s+(?:at|for|in|with|on|since|and)\b|[,.;!?]|$)",
    )
    for match in _find(
        r"\bI(?:'m| am)\s+(?:now\s+)?(?P<t>self-employed|unemployed|retired|a stay-at-home (?:mom|dad|"
        r"parent))\b",
        sentence,
        IGNORE,
    ):
        yield Finding(
            "fact",
            "job_title",
            match.group("t").removeprefix("a "),
            match.span("t"),
            category="career",
            guards=CURRENT_FACT_GUARDS,
        )
    for pattern in patterns:
        for match in _find(pattern, sentence, IGNORE):
            title = match.group("t").strip()
            if title.lower() in ("student", "lead") and "been" not in match.group(0):
                pass
            yield Finding(
                "fact", "job_title", title, match.span("t"), category="career", guards=CURRENT_FACT_GUARDS
            )
    for match in _find(
        r"\bI\s+(?:currently\s+|now\s+|also\s+|still\s+)?teach\s+(?P<s>[A-Z]?[a-z]+(?:\s+[A-Z]?[a-z]+)?)"
        r"(?=\s+(?:at|in|to|for|from)\b|[,.;!?]|$)",
        sentence,
    ):  # "I teach maths at a primary school": a maths teacher
        taught = match.group("s")
        if not re.match(r"(?:myself|people|them|him|her|you|kids|children|students|classes|part)\b", taught):
            yield Finding(
                "fact",
                "job_title",
                f"{taught} teacher",
                match.span(),
                category="career",
                guards=CURRENT_FACT_GUARDS,
            )


def company(sentence: str) -> Iterator[Finding]:
    patterns = (
        rf"\b(?:work|working|works|employed|am|'m)\s+(?:at|for|by|with)\s+{ORG}",
        rf"\b(?:{TITLE_NOUN})s?\s+(?:at|for)\s+{ORG}",
        rf"\b(?i:my (?:job|role|title|position|job title) is)\b[^.;!?]*?\b(?:at|for|with)\s+{ORG}",
        rf"\b(?:I|we)\s+(?:just\s+|recently\s+)?joined\s+{ORG}",
        rf"\b(?:I|we)\s+(?:just\s+|recently\s+)?(?:left|quit)\s+[^.;!?]{{1,40}}?\s*(?:,|and|to)\s+(?:then\s+|now\s+)?"
        rf"(?:joined|join|moved\s+to|went\s+to)\s+{ORG}",
        rf"\b(?:work|working|works)\s+(?:at|for|in)\s+an?\s+(?:[a-z-]+\s+){{0,2}}(?:company|firm|startup|agency|"
        rf"studio|shop|store|bakery|restaurant|café|cafe|bar|clinic|hospital|school|bank|business|consultancy|"
        rf"charity|nonprofit|brewery|lab|hotel|gym|salon|garage|factory|warehouse)\s+(?:called|named)\s+{ORG}",
        rf"\b(?:I've|I have|we've|we have)\s+been\s+(?:at|with)\s+{ORG}",
    )
    for pattern in patterns:
        for match in _find(pattern, sentence):
            name = re.sub(r"^(?:The|the)\s+", "", match.group("c")).strip()
            name = re.sub(r"\s+(?:and|of|&)$", "", name).rstrip(".'")
            if (
                not name
                or name in NOT_PLACES
                or aliases.CITY_EN_ALIAS.fullmatch(name)
                or re.match(r"(?:University|College)", name)
            ):
                continue
            yield Finding(
                "fact", "company", name, match.span("c"), category="career", guards=CURRENT_FACT_GUARDS
            )
    for match in _find(
        r"\b(?:work|working|works)\s+(?:at|for)\s+an?\s+(?P<i>[a-z][a-z -]{1,30}?)\s+"
        r"(?:company|startup|firm|agency|bank|business|shop|studio)\b",
        sentence,
        IGNORE,
    ):
        yield Finding(
            "fact",
            "industry",
            match.group("i"),
            match.span("i"),
            category="career",
            guards=CURRENT_FACT_GUARDS,
        )


def target_city(sentence: str) -> Iterator[Finding]:
    pattern = (
        rf"\b(?:want|plan|planning|hope|hoping|'d like|would like|'d love|would love|going|considering|"
        rf"thinking of|aim|aiming|"
        rf"intend|intending)\s+(?:to\s+)?(?:move|moving|relocate|relocating|immigrate|immigrating|emigrate)\s+"
        rf"to\s+{PLACE}"
    )
    for match in _find(pattern, sentence, 0):
        place = re.split(r"\s+(?:and|but|for|since|with|by|in|next|this)\b", match.group("p"))[0].rstrip(
            ".,'"
        )
        if place.split()[0] not in NOT_PLACES:
            yield Finding(
                "intent",
                "target_city",
                aliases.city_name(place),
                match.span("p"),
                category="immigration",
                guards=INTENT_GUARDS,
            )


def location(sentence: str) -> Iterator[Finding]:
    patterns = (
        (
            rf"\b(?:I|we)(?:\s+|(?='))(?:currently\s+|now\s+|still\s+|just\s+|recently\s+|finally\s+|"
            rf"already\s+|also\s+)?(?:live|living|reside|am based|'m "
            rf"based|'re "
            rf"based|are based|"
            rf"am located|'m located|moved|relocated|am living|'m living|'ve lived|have lived|have been "
            rf"living|"
            rf"'ve been living|stay|am staying)\s+(?:[\w']+\s+){{0,4}}?(?:in|to|at|out of)\s+{PLACE}",
            "location",
        ),
        (rf"\b(?:based|living|residing|located) (?:in|out of)\s+{PLACE}", "location"),
        (
            rf"^\W*(?i:(?:just|recently|finally|since)\s+)?(?i:moved|relocated)\s+(?:back\s+)?(?:here\s+)?to\s+{PLACE}",
            "location",
        ),  # the subject left out, as chat does: "Moved to Leeds in June"
        (
            rf"\b(?:moved|relocated|moving|relocating)\b[^.;!?]{{0,40}}?\bnow\s+(?:living\s+|based\s+)?in\s+{PLACE}",
            "location",
        ),
        (rf"\bI(?:'m| am)\s+now\s+(?:in|based in|living in)\s+{PLACE}", "location"),
        (rf"\bI(?:'m| am)\s+(?:in|out in|over in)\s+{PLACE}(?=\s+(?:now|these days|nowadays)\b)", "location"),
        (rf"\b(?i:home)\s+(?:is|'s)\s+(?:now\s+)?(?:in\s+)?{PLACE}", "location"),
        (rf"^\W*{PLACE}\s+is\s+(?:my\s+)?(?:home|where I live)\b(?!\s+to\b)", "location"),
        (rf"\bI(?:'m| am)\s+(?:originally\s+)?from\s+{PLACE}", "hometown"),
        (rf"\bI\s+grew up in\s+{PLACE}", "hometown"),
    )
    for pattern, key in patterns:
        for match in _find(pattern, sentence):
            place = match.group("p")
            place = re.split(r"\s+(?:and|but|for|since|with)\b", place)[0].rstrip(".,'")
            if place.split()[0] in NOT_PLACES:
                continue
            guards = (
                CURRENT_FACT_GUARDS if key == "location" else frozenset({"question", "negation", "others"})
            )
            yield Finding(
                "fact", key, aliases.city_name(place), match.span("p"), category="basic", guards=guards
            )


def years_of_experience(sentence: str) -> Iterator[Finding]:
    patterns = (
        rf"\b(?P<q>{Q})\+?\s+years?\s+(?:of\s+)?(?:professional\s+|work(?:ing)?\s+|industry\s+|relevant\s+|total\s+)?"
        rf"experience\b",
        rf"\b(?:been|worked|working)\b[^,.;!?]{{0,50}}?\bfor\s+(?:the\s+(?:past|last)\s+)?(?P<q>{Q})\+?\s+years?\b",
        rf"\bI(?:'ve| have)(?: got| had)?\s+(?P<q>{Q})\+?\s+years?\s+(?:in|of)\s+(?!age\b|school\b|"
        rf"college\b)[a-z]",
        r"\b(?:been|worked|working)\b[^,.;!?]{0,50}?\bfor\s+(?P<q>(?:over|more than|almost|nearly|about)\s+)?"
        r"(?:a|one)\s+decade\b",
    )
    for pattern in patterns:
        for match in _find(pattern, sentence, IGNORE):
            if "decade" in match.group(0).lower():
                hedge = (match.group("q") or "").strip().lower()
                value: Any = "10+" if hedge in ("over", "more than") else 10
                approximate = hedge in ("almost", "nearly", "about")
            else:
                quantity = parse_quantity(
                    match.group("q").replace("+", "") + ("+" if "+" in match.group(0) else "")
                )
                if quantity is None:
                    continue
                value, approximate = quantity.value, quantity.approximate
            if isinstance(value, int | float) and not 0 <= value <= 60:
                continue
            yield Finding("fact", "years_of_experience", value, match.span(), approximate, category="career")


RULES: tuple[Rule, ...] = (
    age,
    education,
    university,
    major,
    job_title,
    company,
    location,
    years_of_experience,
    target_city,
)
