"""Profile facts beyond the first rules, in Chinese and English: ages in words without 岁 ("本人六十上下",
"Mid-thirties, ..."), birth years ("85年的", "born in 1990", "90后"), a Hong Kong employer, a tech
background (seed 000's hasHongKongEmployer / hasTechBackground, stated either way).

Ages stay vague: 来/多 -> "40+", 几 -> "40-49", 上下 -> "45-55", 出头 -> "early 40s", "mid-thirties" ->
"mid 30s"; a birth year is a number (1988) or a range for a generation (90后 -> "1990-1999").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from strataflow.llm.offline.numbers import decade_phrase, parse_quantity
from strataflow.llm.offline.text import Finding, clause_bounds

Rule = Callable[[str], Iterator[Finding]]
IGNORE = re.IGNORECASE
STATED_EITHER_WAY = frozenset({"question", "others", "modal"})
DECADES_EN = r"twenties|thirties|forties|fifties|sixties|seventies|eighties|[2-8]0'?s"


def _age_value(number: int, post: str) -> str | int | None:
    if post.startswith(("来", "多")):
        return f"{number}+"
    if post.startswith("几"):
        return f"{number}-{number + 9}"
    if post == "上下":
        return f"{number - 5}-{number + 5}"
    if post == "出头":
        return f"early {number}s"
    return None


def age_words_zh(sentence: str) -> Iterator[Finding]:
    pattern = (
        r"(?:^|(?<=[，,：:我])|(?<=今年|年龄|年纪|本人|已经|也就))\s*"
        r"(?P<q>[二三四五六七八九]十|[2-9]0)(?P<post>来岁?|多岁?|几岁?|上下|出头)(?:了|吧|啦)?"
        r"(?![万千百元块个平米斤分年号度次条张只%]|岁?(?:的时候|时|那年))"
    )
    for match in re.finditer(pattern, sentence):
        quantity = parse_quantity(match.group("q"))
        if quantity and isinstance(quantity.value, int):
            value = _age_value(quantity.value, match.group("post").rstrip("岁"))
            if value is not None:
                yield Finding("fact", "age", value, match.span(), category="basic")


def age_words_en(sentence: str) -> Iterator[Finding]:
    patterns = (
        rf"^\W*(?P<d>(?:early|mid|late)[\s-]*(?:{DECADES_EN}))\b",
        rf"\bin\s+my\s+(?P<d>(?:early|mid|late)?[\s-]*(?:{DECADES_EN}))\b",
    )
    for pattern in patterns:
        for match in re.finditer(pattern, sentence, IGNORE):
            value = decade_phrase(match.group("d"))
            if value:
                yield Finding("fact", "age", value, match.span(), category="basic")
                return


def _year(text: str) -> int | None:
    digits = text.strip("'’ ")
    if not digits.isdigit():
        return None
    year = int(digits)
    if len(digits) == 2:
        year += 2000 if year < 30 else 1900
    return year if 1920 <= year <= 2025 else None


def birth_year_zh(sentence: str) -> Iterator[Finding]:
    patterns = (
        r"(?:^|(?<=[，,：:我])|(?<=我是|本人))\s*(?P<y>(?:19|20)?\d{2})\s*年"
        r"(?:的(?=[，,。！!；;\s]|$|人)|生的?|出生|生人)",
        r"出生(?:于|在)\s*(?P<y>(?:19|20)\d{2})\s*年",
    )
    for pattern in patterns:
        for match in re.finditer(pattern, sentence):
            year = _year(match.group("y"))
            if year:
                yield Finding("fact", "birth_year", year, match.span(), category="basic")
                return
    generation = re.search(
        r"(?:^|(?<=[，,：:])|(?<=我是)|(?<=本人是)|(?<=作为))(?:一个|一名|个)?(?P<g>\d0|\d5)后", sentence
    )
    if generation:
        start = _year(generation.group("g"))
        if start:
            span = 9 if start % 10 == 0 else 4
            yield Finding(
                "fact", "birth_year", f"{start}-{start + span}", generation.span(), category="basic"
            )


def birth_year_en(sentence: str) -> Iterator[Finding]:
    match = re.search(
        r"\b(?i:born)\s+(?:(?:in|on)\s+)?(?:(?:in\s+)?[A-Z][a-z]+\s+(?:\d{1,2}(?:st|nd|rd|th)?,?\s+)?)?"
        r"(?:in\s+)?(?P<y>(?:19|20)\d{2}|['’]\d{2})\b",
        sentence,
    )
    if match:
        year = _year(match.group("y"))
        if year:
            yield Finding("fact", "birth_year", year, match.span(), category="basic")


def _clauses(sentence: str) -> Iterator[tuple[int, str]]:
    for start, end in clause_bounds(sentence):
        yield start, sentence[start:end]


HK_ZH = r"香港|港(?=[企司资])|本港"
EMPLOYER_ZH = r"雇主|offer|Offer|OFFER|聘书|录用|工作机会|雇佣|入职"
NEGATED_ZH = re.compile(r"(没有|还没|暂时没|并没|没|未|无)")


def hk_employer_zh(sentence: str) -> Iterator[Finding]:
    for start, clause in _clauses(sentence):
        hk, job = re.search(HK_ZH, clause), re.search(EMPLOYER_ZH, clause)
        if hk and job and re.search(r"(拿到|收到|有|找到|签|已经|接到|谈好|获得)", clause):
            value = not NEGATED_ZH.search(clause[: max(hk.start(), job.start())])
            span = (start + min(hk.start(), job.start()), start + max(hk.end(), job.end()))
            yield Finding(
                "fact", "has_hk_employer", value, span, category="immigration", guards=STATED_EITHER_WAY
            )
            return


def hk_employer_en(sentence: str) -> Iterator[Finding]:
    for start, clause in _clauses(sentence):
        hk = re.search(r"\b(?:Hong Kong|HK)\b", clause)
        job = re.search(r"\b(?:employer|job offer|offer|sponsor|hired|position)\b", clause, IGNORE)
        if (
            hk
            and job
            and re.search(r"\b(?:have|has|got|received|signed|accepted|found|landed)\b", clause, IGNORE)
        ):
            negated = re.search(
                r"\b(?:don't|do not|no|not|haven't|have not|without|yet to|never)\b", clause, IGNORE
            )
            span = (start + min(hk.start(), job.start()), start + max(hk.end(), job.end()))
            yield Finding(
                "fact", "has_hk_employer", not negated, span, category="immigration", guards=STATED_EITHER_WAY
            )
            return


def tech_background_zh(sentence: str) -> Iterator[Finding]:
    match = re.search(
        r"(?P<neg>不是|并非|非|没有)?"
        r"(?P<f>理工科?|技术|科技|计算机|IT|工科|STEM|互联网|软件|文科|商科|艺术|财经|金融)"
        r"(?:类|的|相关)?(?:专业)?(?:背景|出身)|(?P<doing>做技术|搞技术|技术岗|写代码)",
        sentence,
    )
    if match:
        field = match.group("f") or ""
        value = bool(match.group("doing")) or (
            not match.group("neg") and field not in ("文科", "商科", "艺术", "财经", "金融")
        )
        yield Finding(
            "fact", "has_tech_background", value, match.span(), category="career", guards=STATED_EITHER_WAY
        )


def tech_background_en(sentence: str) -> Iterator[Finding]:
    match = re.search(
        r"\b(?P<neg>non-?|no\s+|not\s+an?\s+)?(?P<f>tech|technical|technology|engineering|STEM|"
        r"computer science|CS|software|IT|finance|business|arts?|humanities)\s+background\b",
        sentence,
        IGNORE,
    )
    if match:
        nontech = match.group("f").lower() in ("finance", "business", "art", "arts", "humanities")
        yield Finding(
            "fact",
            "has_tech_background",
            not (match.group("neg") or nontech),
            match.span(),
            category="career",
            guards=STATED_EITHER_WAY,
        )


ZH_RULES: tuple[Rule, ...] = (age_words_zh, birth_year_zh, hk_employer_zh, tech_background_zh)
EN_RULES: tuple[Rule, ...] = (age_words_en, birth_year_en, hk_employer_en, tech_background_en)
