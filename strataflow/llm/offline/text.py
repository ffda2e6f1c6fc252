"""Shared text helpers of the offline rules: findings, sentences and clauses, guards, key slugs.

A rule looks at one sentence and returns Findings with the character span that stated them. The engine
then keeps the clause(s) around the span as the statement (the user's own words) and drops a finding
whose clause is a question, is negated, is about someone else, is hypothetical or a plan (for facts),
or is about the past (for current facts such as location and employer).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from strataflow.llm.offline.topics import FILLER_ZH, TOPIC_PARTS_ZH, TOPIC_ZH
from strataflow.textsearch import CJK

CJK_CHAR = re.compile(f"[{CJK}]")

# Sentence ends: Chinese marks, newlines, English . ! ? ; (a dot only before a space or the end: 1.5k stays).
SENTENCE_END = re.compile(r"[。！？!?；;\n]+|\.(?=\s|$)")
# Clause boundaries inside a sentence: commas (not inside 1,200), colons, dashes, "but", "and I/we/my".
CLAUSE_BREAK = re.compile(
    r"[，,:：](?!\d{3})|(?<=\s)(?:but|and|so|while|although|though)(?=\s+(?:i|i'm|i've|we|we're|my|our|"
    rf"the|it|they|he|she)\b)|(?<=[{CJK}])(?:但是|不过|而且|然后)",
    re.IGNORECASE,
)

QUESTION_ZH = re.compile(
    r"(吗[\s？?]*$|呢[\s？?]*$|是否|能不能|可不可以|可以不|行不行|有没有|是不是|要不要|怎么|如何|哪|什么|多少|(?<![十百千0-9])几[个岁年]$)"
)
QUESTION_EN = re.compile(
    r"^\s*(?:and\s+|so\s+|but\s+)?(?:can|could|should|would|will|do|does|did|is|are|am|was|were|have|has|"
    r"what|how|why|when|where|which|who|whom|whose|may|shall)\b",
    re.IGNORECASE,
)
NEGATION_ZH = re.compile(r"(不是|不在|没有|没|不(?![错少久过])|未|并非|别)")
NEGATION_EN = re.compile(
    r"\b(not|never|no longer|don't|doesn't|didn't|isn't|aren't|wasn't|haven't|hasn't|no)\b|n't\b",
    re.IGNORECASE,
)
OTHERS_ZH = re.compile(
    r"(老婆|老公|妻子|丈夫|太太|爱人|对象|男朋友|女朋友|男友|女友|孩子|儿子|女儿|父亲|母亲|爸爸|妈妈|爸|妈|哥哥|姐姐|"
    r"弟弟|妹妹|朋友|同事|老板|领导|客户|同学|室友|他们|她们|他|她|别人|有人)"
)
OTHERS_EN = re.compile(
    r"\b(?:my|our|his|her|their)\s+(?:wife|husband|spouse|partner|son|daughter|kids?|child|children|friend|"
    r"friends|colleague|coworker|co-worker|boss|manager|mom|mother|dad|father|brother|sister|parents?|client|"
    r"girlfriend|boyfriend|fianc[ée]e?|roommate|cousin|uncle|aunt)\b|\b(?:he|she|they|his|her|their)\b",
    re.IGNORECASE,
)
# Someone else is the subject of the clause: it starts (after one optional word) with a relative or a pronoun.
OTHERS_ZH_SUBJECT = re.compile(
    rf"^(?:(?:[{CJK}]{{0,2}}?(?:我的?|我们的?)?|.{{0,2}}){OTHERS_ZH.pattern}|大的|小的|老大|老二|老三)"
)
OTHERS_EN_SUBJECT = re.compile(rf"^\W*(?:[A-Za-z]+,?\s+)?(?:{OTHERS_EN.pattern})", re.IGNORECASE)
# The user with someone else is still the user: 我和老公住在青岛, "My wife and I live in Cork".
WITH_ME = re.compile(
    r"^\W*(?:我(?:和|跟|与|同)|(?:my|our)\s+[\w-]+(?:\s+[A-Z][a-z]+)?\s+and\s+I\b|I\s+and\s+my\b)",
    re.IGNORECASE,
)
MODAL_ZH = re.compile(r"(想|打算|计划|准备|希望|考虑|要是|如果|假如|万一|申请|争取|梦想|目标|将来|以后|未来)")
MODAL_EN = re.compile(
    r"\b(want|wants|wanted|wanna|would like|'d like|hope|hoping|plan|planning|plans|going to|gonna|thinking|"
    r"considering|consider|if|would|might|may|wish|dream|someday|one day|aim|aiming|apply|applying|"
    r"intend|intending|looking to)\b",
    re.IGNORECASE,
)
PAST_ZH = re.compile(r"(以前|之前|曾经|原来|过去|当年|那时|早年|小时候)")
PAST_EN = re.compile(
    r"\b(used to|previously|formerly|back then|before that|years ago|ex-|former)\b", re.IGNORECASE
)


@dataclass(frozen=True)
class Finding:
    """One item a rule found in a sentence, with the span (start, end) of the words that stated it.

    Guards: each True flag drops the finding when its clause is a question / negated / about someone
    else / hypothetical or planned / about the past.
    """

    kind: str
    key: str
    value: Any
    span: tuple[int, int]
    approximate: bool = False
    confidence: float = 0.9
    category: str | None = None
    guards: frozenset[str] = field(
        default_factory=lambda: frozenset({"question", "negation", "others", "modal"})
    )
    weak: bool = False  # said in passing ("my wife and I"): never replaces a stated value or a stored key


CURRENT_FACT_GUARDS = frozenset({"question", "negation", "others", "modal", "past"})
INTENT_GUARDS = frozenset({"question", "negation", "others"})


def is_chinese(text: str) -> bool:
    return bool(CJK_CHAR.search(text))


def sentences(text: str) -> list[tuple[int, str]]:
    """(offset, sentence) pairs of a message; offsets index the original text."""
    result: list[tuple[int, str]] = []
    start = 0
    for match in SENTENCE_END.finditer(text):
        end = match.end()
        if text[start:end].strip(" \n。！？!?；;."):
            result.append((start, text[start:end]))
        start = end
    if text[start:].strip():
        result.append((start, text[start:]))
    return result


def clause_bounds(sentence: str) -> list[tuple[int, int]]:
    """(start, end) of every clause of a sentence."""
    bounds, start = [], 0
    for match in CLAUSE_BREAK.finditer(sentence):
        if match.start() > start:
            bounds.append((start, match.start()))
        start = match.end()
    bounds.append((start, len(sentence)))
    return [(s, e) for s, e in bounds if sentence[s:e].strip()] or [(0, len(sentence))]


def clause_span(sentence: str, span: tuple[int, int]) -> tuple[int, int]:
    """The clause(s) covering span: from the start of the clause holding span[0] to the end of span[1]'s."""
    bounds = clause_bounds(sentence)
    start = next((s for s, e in bounds if s <= span[0] < e), 0)
    end = next((e for s, e in bounds if s < span[1] <= e), len(sentence))
    return start, max(end, span[1])


def statement_of(sentence: str, span: tuple[int, int]) -> str:
    start, end = clause_span(sentence, span)
    return sentence[start:end].strip(" \t\n，,。.;；!！?？、:：\"'“”")


def is_question(sentence: str, span: tuple[int, int]) -> bool:
    """The clause holding span asks something (an assistant-style question is not a stated fact)."""
    start, end = clause_span(sentence, span)
    clause = sentence[start:end]
    is_last = not sentence[end:].strip(" \t，,")
    ends_with_mark = sentence.rstrip().endswith(("?", "？"))
    if is_chinese(clause):
        return bool(QUESTION_ZH.search(clause)) or (is_last and ends_with_mark)
    return bool(QUESTION_EN.match(clause)) or (is_last and ends_with_mark)


def _prefix(sentence: str, span: tuple[int, int]) -> str:
    start, _ = clause_span(sentence, span)
    return sentence[start : span[0]]


def guard_fails(finding: Finding, sentence: str) -> str | None:
    """The name of the first guard that drops this finding, or None when it stands."""
    prefix = _prefix(sentence, finding.span)
    zh = is_chinese(sentence)
    checks = {
        "question": lambda: is_question(sentence, finding.span),
        "negation": lambda: bool((NEGATION_ZH if zh else NEGATION_EN).search(prefix[-6:] if zh else prefix)),
        "others": lambda: (
            bool(OTHERS_ZH_SUBJECT.match(prefix.strip()) or OTHERS_EN_SUBJECT.match(prefix))
            and not WITH_ME.match(prefix)
        ),
        "modal": lambda: bool(MODAL_ZH.search(prefix) or MODAL_EN.search(prefix)),
        "past": lambda: bool(PAST_ZH.search(prefix) or PAST_EN.search(prefix)),
    }
    for name in ("question", "negation", "others", "modal", "past"):
        if name in finding.guards and checks[name]():
            return name
    return None


STOPWORDS_EN = frozenset(
    "a an the to of for on in at with and or our my your their this that these those it its we i use using "
    "go going switch move from into be is are was were will new all some".split()
)


@lru_cache(maxsize=1)
def _jieba() -> Any:
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


def cut(text: str) -> list[str]:
    """jieba tokens (precise mode), whitespace dropped."""
    return [token for token in _jieba().cut(text) if token.strip()]


def _topic_zh(token: str) -> str | None:
    """The English topic of a Chinese token: the word itself, else the longest known part of it."""
    if token in TOPIC_ZH:
        return TOPIC_ZH[token]
    parts = [part for part in TOPIC_PARTS_ZH if part in token] + [word for word in TOPIC_ZH if word in token]
    return (TOPIC_ZH.get(max(parts, key=len)) or TOPIC_PARTS_ZH.get(max(parts, key=len))) if parts else None


def slug(text: str, max_words: int = 3) -> str:
    """A lower snake_case key part from any text: Latin words as they are, Chinese topics in English
    (a word, or the known topic inside it: 换个城市 -> city); Chinese with no known topic is skipped when
    another word names the topic, and only as a last resort becomes u<hex> (stable and reversible).
    Empty input gives 'general'."""
    parts: list[str] = []
    unknown: list[str] = []
    for token in cut(text) if is_chinese(text) else re.findall(r"[A-Za-z0-9]+", text):
        if CJK_CHAR.search(token):
            english = _topic_zh(token)
            if english:
                parts.append(english)
            elif token not in FILLER_ZH:
                unknown.append("".join(f"u{ord(ch):x}" for ch in token if CJK_CHAR.match(ch)))
        elif re.fullmatch(r"[A-Za-z0-9]+", token) and token.lower() not in STOPWORDS_EN:
            parts.append(token.lower())
    words = list(dict.fromkeys(p for p in parts if p))[:max_words] or unknown[:max_words]
    key = re.sub(r"_+", "_", "_".join(words)).strip("_")
    if not key:
        return "general"
    return key if key[0].isalpha() else f"n{key}"


FIRST_PERSON = re.compile(r"我|本人|\b(?:I|I'm|I've|me|my)\b")
RELATIVE_WORD = re.compile(
    r"(儿子|女儿|闺女|孩子|小孩|娃|宝宝|老大|老二|老公|老婆|爱人|妻子|丈夫|太太|媳妇|爸爸|妈妈|父亲|母亲|哥哥|姐姐|弟弟|妹妹)|"
    r"\b(son|daughter|kid|child|baby|toddler|wife|husband|partner|mom|mother|dad|father|brother|sister)s?\b",
    re.IGNORECASE,
)


def continues_someone_else(sentence: str, span: tuple[int, int]) -> bool:
    """The clause at span has no subject of its own and the clause before it has someone else as its subject
    (我姐姐叫王丽，在广州当护士 / "My sister lives in Madrid, works as a nurse"): it goes on about them."""
    start, _ = clause_span(sentence, span)
    if start == 0 or FIRST_PERSON.search(sentence[start : span[0]]):
        return False
    previous = [(s, e) for s, e in clause_bounds(sentence) if e <= start]
    if not previous:
        return False
    clause = sentence[previous[-1][0] : previous[-1][1]].strip()
    return bool(OTHERS_ZH_SUBJECT.match(clause) or OTHERS_EN_SUBJECT.match(clause))


def relative_topic(sentence: str, span: tuple[int, int]) -> bool:
    """The clause at span has no subject of its own and the clause before it is about a relative
    (我有个儿子，今年三岁 / "I have a daughter, 6 years old"): what it states is the relative's."""
    start, _ = clause_span(sentence, span)
    if start == 0 or FIRST_PERSON.search(sentence[start : span[0]]):
        return False
    before = sentence[:start]
    people = [(m.start(), "relative") for m in RELATIVE_WORD.finditer(before)]
    people += [(m.start(), "self") for m in FIRST_PERSON.finditer(before)]
    return bool(people) and max(people)[1] == "relative"
