"""What a search query says beyond its words, for the ranking (strataflow.retrieval.ranking): whom it names,
whether it asks *when*, the period it names, and whether it asks for a set of things.

These are readings of the question's form, argued per question category of the dialog-recall benchmark and
general to any chat log (the figures are in docs/retrieval-quality.md):

- speakers: the query names a speaker of the scope (a chat export's `metadata.speaker`), e.g. "What does
  Melanie do to destress?". The answer is in that speaker's own turns, not in the other side's replies that
  address them by name ("Wow, Melanie!");
- asks_when: "when did...", "how long ago...", "what year...": the answer is a turn that states a time
  ("yesterday", "last Friday", "in 2022"), which the session date then places;
- period: a date, month or year in the query ("in June", "May 2023", "on 3 June, 2023"), or a time relative to
  now ("yesterday", "last week", "3 days ago"): turns whose event time falls in it are more likely;
- asks_for_set: "What activities...", "Which cities...", "both", "how many times": the answer gathers turns
  from several sessions (the multi-hop category). The ranking no longer reads it: a session spread built on
  it cost recall with the absolute score (docs/retrieval-quality.md); it stays for callers that group hits.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from strataflow.llm.embeddings import CJK_LETTER
from strataflow.timeutil import WEEK, day_bounds, week_bounds, week_start

MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTH = "|".join(MONTHS)
_YEAR = r"(?:19|20)\d\d"
WHEN_QUESTION = re.compile(
    r"^\W*(when|how\s+long|since\s+when|what\s+(year|month|date|day|time)|which\s+(year|month|day))\b"
    r"|\bhow\s+long\s+ago\b|\bhow\s+many\s+(years|months|weeks|days)\b"
    r"|什么时候|何时|哪一?年|哪个月|哪天|多久|多长时间",
    re.IGNORECASE,
)
# A turn that states a time: a relative expression, a weekday, a month, a year or a date.
TIME_EXPRESSION = re.compile(
    r"\b(yesterday|today|tonight|tomorrow|ago|recently|lately|earlier|since|weekend"
    r"|(last|this|next|past)\s+(night|week|weekend|month|year|summer|winter|spring|fall|autumn|time|\w+day)"
    rf"|(mon|tues|wednes|thurs|fri|satur|sun)days?|{_MONTH}|{_YEAR})\b"
    r"|\d{1,2}[/.-]\d{1,2}|昨天|前天|今天|明天|上周|上个?月|去年|今年|周末|星期.|礼拜.|\d+月|\d+年",
    re.IGNORECASE,
)
SET_QUESTION = re.compile(
    r"^\W*(what|which)\s+(\w+\s+){0,3}?(?!(does|was|is|has|his|this|its|yes|us|days|weeks|months|years)\b)\w+s\b(?!\s+(is|was)\b)"
    r"|\b(both|in\s+common|how\s+many\s+times|what\s+are\s+(some|the\s+names))\b",
    re.IGNORECASE,
)
_DAY_FIRST = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH}),?\s+({_YEAR})\b", re.I)
_MONTH_FIRST = re.compile(rf"\b({_MONTH})\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+({_YEAR})\b", re.I)
_MONTH_YEAR = re.compile(rf"\b({_MONTH})(?:,?\s+({_YEAR}))?\b", re.I)
_YEAR_ONLY = re.compile(rf"\b(?:in|during|of|since)\s+({_YEAR})\b", re.I)
_RELATIVE = re.compile(
    r"\b(yesterday|today|(last|this|past)\s+(week|month|year)|(\d+|a|one|two|three)\s+(day|week|month)s?\s+ago)\b"
    r"|昨天|今天|上周|本周|这周|上个?月|本月|这个月",
    re.I,
)
_SMALL_NUMBERS = {"a": 1, "one": 1, "two": 2, "three": 3}
DAY_BEFORE = timedelta(days=7)  # a named day also covers the week before it ("the week before 3 June")


@dataclass(frozen=True)
class Period:
    """Event time the query points at: [start, end), or (a month named without a year) calendar months of
    any year, in zone tz."""

    start: datetime | None = None
    end: datetime | None = None
    months: frozenset[int] = frozenset()
    tz: ZoneInfo | None = None

    def contains(self, moment: datetime | None) -> bool:
        if moment is None:
            return False
        if self.months:
            return (moment.astimezone(self.tz) if self.tz else moment).month in self.months
        return self.start is not None and self.end is not None and self.start <= moment < self.end


@dataclass(frozen=True)
class QueryReading:
    """What the ranking reads from a query (see the module docstring)."""

    speakers: frozenset[str] = frozenset()
    asks_when: bool = False
    period: Period | None = None
    asks_for_set: bool = False
    names_subject: bool = (
        False  # it names the subject searched, or refers to them as he, she, 她 (without_subject)
    )


def read_query(
    query: str, speakers: Iterable[str], tz: ZoneInfo, now: datetime, subject_id: str | None = None
) -> QueryReading:
    """The reading of `query` among the scope's `speakers` (names from message metadata), in zone tz, in a
    search within `subject_id` (None: the whole namespace)."""
    return QueryReading(
        speakers=named_speakers(query, speakers),
        asks_when=bool(WHEN_QUESTION.search(query)),
        period=named_period(query, tz, now),
        asks_for_set=bool(SET_QUESTION.search(query)),
        names_subject=without_subject(query, subject_id) != query,
    )


def named_speakers(query: str, speakers: Iterable[str]) -> frozenset[str]:
    """The speakers whose name (whole, or its first word) the query contains as a word, any case."""
    found = set()
    for speaker in speakers:
        names = {speaker.strip(), speaker.strip().split()[0]} if speaker and speaker.strip() else set()
        if any(re.search(rf"(?<!\w){re.escape(name)}(?!\w)", query, re.IGNORECASE) for name in names):
            found.add(speaker)
    return frozenset(found)


def without_speakers(query: str, speakers: Iterable[str]) -> str:
    """The query with the named speakers' names (and a possessive 's) taken out, for its embedding: the
    speaker is matched on the turn's speaker field, and a name left in the text pulls the embedding towards
    the other side's turns that address that person."""
    names = sorted(
        {n for s in speakers for n in (s.strip(), s.strip().split()[0]) if n}, key=len, reverse=True
    )
    if not names:
        return query
    pattern = r"(?<!\w)(" + "|".join(re.escape(n) for n in names) + r")(['’]s)?(?!\w)\s*"
    stripped = re.sub(pattern, "", query, flags=re.IGNORECASE).strip()
    return stripped or query


# Third-person references to a person: within one subject's memory they name the subject, whose rows are
# all about them. 其他 ("other") and 他人 ("others") are not references.
_THIRD_PERSON = re.compile(
    r"(?<!\w)(he|she|him|his|her|hers|himself|herself)(?!\w)\s*|(?<!其)(他们|她们|他|她)(?!人)的?",
    re.IGNORECASE,
)


# The searched subject as the user (first person) or as the agent speaks of them (second person, "the user",
# 用户): within one subject's memory they refer to the subject as surely as a name does, whatever the id
# (opaque ids such as u48213 are the norm). "How do I ..." / "How do you ..." asks how a thing is done, not
# about anyone: not a reference.
_HOW_TO = re.compile(r"(?i)^\s*how\s+(do|can|would|should|could|to)\s+(i|you|we|one)\b")
_PERSON = re.compile(
    r"(?<![^\W\d_])(?:(?i:(?:the|this|that|our|my)\s+(?:user|customer|client|person)(?:['’]s)?)"
    r"|I(?:['’](?:m|ve|d|ll))?|us|(?i:me|my|mine|myself|we|our|ours|ourselves|you|your|yours|yourself))"
    r"(?![^\W\d_])\s*"
    r"|(?:这位|这个)?(?:用户|客户|顾客)(?:的)?|我们的?|我的?",
)


def refers_to_subject(query: str) -> bool:
    """Whether the query speaks of the searched subject in the first or second person or as the agent's
    user or customer (the user, 用户, 这位客户; not a how-to question's impersonal I or you)."""
    return not _HOW_TO.search(query) and bool(_PERSON.search(query))


def without_subject(query: str, subject_id: str | None) -> str:
    """The query for its embedding in a search within one subject: without the subject's own names (the
    words of its id: "dora" for "Dora's", "marek_oduya" for "Marek"), third-person pronouns (he, her,
    她的) and first- and second-person references and the agent's words for its user (refers_to_subject:
    my, I, you, the user, the customer, 我的, 用户, 这位客户). Every row in scope is about the subject, so
    the reference says nothing about which row answers, while left in the text it pulls the embedding
    towards rows that happen to name the subject or start with a pronoun (她在一所小学教数学 for
    她有宠物吗？). Measured on bench.facts: top-1 from 0.86 to 0.92 in English (MiniLM) and from 0.72 to
    0.86 in Chinese (e5); docs/retrieval-quality.md. Without a subject (a namespace-wide search) the query is
    returned as it is."""
    if not subject_id:
        return query
    names = sorted(set(re.findall(r"[^\W\d_]{2,}", subject_id)), key=len, reverse=True)
    stripped = query
    for name in names:  # a CJK name is written without spaces around it: matched anywhere
        edge = "" if CJK_LETTER.search(name) else r"(?<![^\W\d_])"
        tail = "" if CJK_LETTER.search(name) else r"(['’]s)?(?![^\W\d_])\s*"
        stripped = re.sub(edge + re.escape(name) + tail, "", stripped, flags=re.IGNORECASE)
    stripped = _THIRD_PERSON.sub("", stripped)
    # A query that names the subject or says he / she speaks of them to someone else: its I and we are the
    # asker ("What should I not offer him?"), left in.
    if stripped == query and refers_to_subject(stripped):
        stripped = _PERSON.sub("", stripped)
    stripped = re.sub(r"\s{2,}", " ", stripped).strip()
    return stripped if re.search(r"\w", stripped) else query


def has_time_expression(text_value: str) -> bool:
    return bool(TIME_EXPRESSION.search(text_value or ""))


def named_period(query: str, tz: ZoneInfo, now: datetime) -> Period | None:
    """The period a query names: a day (and the week before it), a month (and the month after it, when turns
    tell of last month), a year, or a time relative to `now`. None when it names none."""
    for pattern, order in ((_DAY_FIRST, (0, 1, 2)), (_MONTH_FIRST, (1, 0, 2))):
        found = pattern.search(query)
        if found:
            parts = found.groups()
            day, month, year = int(parts[order[0]]), _month(parts[order[1]]), int(parts[order[2]])
            try:
                start = datetime(year, month, day, tzinfo=tz)
            except ValueError:
                return None
            return Period(start - DAY_BEFORE, start + timedelta(days=2))
    found = _MONTH_YEAR.search(query)
    if found and (found.group(2) or not _is_may_verb(query, found)):
        month = _month(found.group(1))
        if not found.group(2):  # "in June": June of any year (and July, which may tell of it)
            return Period(months=frozenset({month, month % 12 + 1}), tz=tz)
        start = datetime(int(found.group(2)), month, 1, tzinfo=tz)
        return Period(start, _add_months(start, 2))
    found = _YEAR_ONLY.search(query)
    if found:
        year = int(found.group(1))
        return Period(datetime(year, 1, 1, tzinfo=tz), datetime(year + 1, 1, 1, tzinfo=tz))
    return _relative_period(query, tz, now)


def _relative_period(query: str, tz: ZoneInfo, now: datetime) -> Period | None:
    found = _RELATIVE.search(query)
    if not found:
        return None
    day = now.astimezone(tz).date()
    today = day_bounds(day, tz)[0]
    word = found.group(0).lower()
    if word in ("today", "今天"):
        return Period(*day_bounds(day, tz))
    if word in ("yesterday", "昨天"):
        return Period(*day_bounds(day - timedelta(days=1), tz))
    if word.endswith("ago"):
        count, unit = found.group(4).lower(), found.group(5).lower()
        amount = _SMALL_NUMBERS.get(count) or int(count)
        days = {"day": 1, "week": 7, "month": 30}[unit] * amount
        centre = today - timedelta(days=days)
        return Period(centre - timedelta(days=max(2, days // 4)), centre + timedelta(days=max(2, days // 4)))
    unit = (
        "week"
        if ("week" in word or "周" in word)
        else "month"
        if ("month" in word or "月" in word)
        else "year"
    )
    this = word.startswith(("this", "本", "这"))
    if unit == "week":
        monday = week_start(day)
        return Period(*week_bounds(monday if this else monday - WEEK, tz))
    if unit == "month":
        first = today.replace(day=1)
        return Period(first, _add_months(first, 1)) if this else Period(_add_months(first, -1), first)
    first = today.replace(month=1, day=1)
    return (
        Period(first, first.replace(year=first.year + 1))
        if this
        else Period(first.replace(year=first.year - 1), first)
    )


def _month(name: str) -> int:
    return MONTHS.index(name.lower()) + 1


def _is_may_verb(query: str, found: re.Match[str]) -> bool:
    """'may' without a year is the verb unless a preposition says it is the month ("in May")."""
    if found.group(1).lower() != "may":
        return False
    return not re.search(r"\b(in|during|since|of|early|mid|late)\s+may\b", query, re.IGNORECASE)


def _add_months(start: datetime, months: int) -> datetime:
    index = start.month - 1 + months
    return start.replace(year=start.year + index // 12, month=index % 12 + 1)
