"""Whether a small model's item is grounded in the subject's own words: general checks on the answer of the
small prompt profile (extract_prompt_small.py), never fitted to a case.

A 0.5B-1.5B model invents values, copies the instructions' example (Tom, a chef in Berlin), takes facts from
questions and "if" sentences, from the assistant's turns, and gives the subject a relative's job. A strong
model's answer (the full profile) and the offline rules normalise values (a diet from "I don't eat meat") and
are not checked this way. An item is kept when:

1. its value is in a line of the subject's it cites (not an assistant turn): a text value as written
   (case-insensitive, ignoring spaces and punctuation), or each of its words (Latin: words of 2+ letters;
   Chinese, which has no spaces: every CJK character); a number when the line states a number (digits,
   Chinese numerals, English number words: "年薪80万" may become 800000);
2. the sentence holding the value is not a question or a hypothetical ("if", "suppose", 如果, 假如, 吗?);
3. a fact about the subject (any key but person_*, family and pets) is not stated of someone else in that
   sentence ("my sister is a doctor", 我姐姐是医生);
4. it is not a repeat (same key and value) and its line has not already given MAX_PER_LINE items.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

MAX_PER_LINE = 6  # a chat line states a few facts; a small model that lists more is enumerating its prompt
FAMILY_KEYS = frozenset({"children", "spouse", "pets", "family", "marital_status", "partner", "parents"})
_SENTENCE_END = re.compile(r"(?<=[.!?。！？；;\n])\s*")
_CJK = re.compile(r"[\u3400-\u9fff]")
_LATIN = re.compile(r"[^\W\d_]{2,}")
_NUMBER = re.compile(
    r"\d|[零一二两三四五六七八九十百千万亿半]|\b(?:one|two|three|four|five|six|seven|eight|nine|ten|"
    r"eleven|twelve|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|million"
    r"|dozen|half|a few)\b",
    re.IGNORECASE,
)
_QUESTION = re.compile(
    r"[?？]\s*$|[吗呢么]\s*[。.]?\s*$|^\s*(?:do|does|did|can|could|should|would|will|is|are|am|what|where|when|"
    r"which|who|why|how)\b",
    re.IGNORECASE,
)
_HYPOTHETICAL = re.compile(
    r"\b(?:if|suppose|supposing|imagine|hypothetically|in case|unless)\b"
    r"|如果|假如|假设|要是|万一|假若|倘若|的话",
    re.IGNORECASE,
)
_RELATIONS_EN = (
    r"sister|brother|mother|mom|mum|father|dad|wife|husband|son|daughter|friend|boss|manager|colleague|"
    r"coworker|co-worker|partner|girlfriend|boyfriend|cousin|uncle|aunt|neighbou?r|roommate|flatmate|"
    r"parents?|grandma|grandpa|grandmother|grandfather|niece|nephew|kid|child|team ?mate"
)
_OTHER_EN = re.compile(
    rf"\b(?:my|our|his|her|their)\s+(?:\w+\s+)?(?:{_RELATIONS_EN})s?\b|^\s*(?:he|she|they)\b", re.IGNORECASE
)
_OTHER_ZH = re.compile(
    r"(?:姐姐|妹妹|哥哥|弟弟|姐|妹|哥|弟|妈妈|母亲|妈|爸爸|父亲|爸|老婆|老公|妻子|丈夫|太太|先生|儿子|女儿|"
    r"朋友|同事|老板|领导|室友|邻居|孩子|父母|爷爷|奶奶|外公|外婆|表哥|表姐|堂哥|堂姐|男朋友|女朋友|对象)"
    r"|^[^我]*[他她]"
)


def fold(text: str) -> str:
    """Lower case without spaces and punctuation: what a value and its line are compared as."""
    return "".join(ch for ch in text.lower() if ch.isalnum())


def sentences(text: str) -> list[str]:
    return [part for part in _SENTENCE_END.split(text) if part.strip()]


def value_text(value: Any) -> str | None:
    """The value as text, or None for a number (checked as one) or a value without text."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return None
    if isinstance(value, list | tuple):
        return " ".join(str(v) for v in value)
    if isinstance(value, dict):
        return " ".join(str(v) for v in value.values())
    text = str(value).strip()
    return None if re.fullmatch(r"[\d.,+\-~]+", text) else text


def found_in(value: str, line: str) -> bool:
    """Whether a text value is in the line: as written, or word by word (every CJK character for Chinese)."""
    folded = fold(value)
    if not folded:
        return False
    if folded in fold(line):
        return True
    low = line.lower()
    cjk = set(_CJK.findall(value))
    words = {w for w in _LATIN.findall(value.lower())}
    if not cjk and not words:
        return False
    return cjk <= set(_CJK.findall(line)) and all(w in low for w in words)


def holding_sentence(value: Any, line: str) -> str | None:
    """The sentence of the line that holds the value (None: the value is not in the line)."""
    text = value_text(value)
    for sentence in sentences(line):
        if text is None:
            if _NUMBER.search(sentence):
                return sentence
        elif found_in(text, sentence):
            return sentence
    if text is not None and found_in(text, line):
        return line  # the value spans sentences ("Leo and Maya. ...")
    return None


def about_someone_else(key: str, sentence: str) -> bool:
    if key.startswith("person_") or key in FAMILY_KEYS:
        return False
    clause = re.split(r"[,，、]", sentence)
    return any(_OTHER_EN.search(part) or _OTHER_ZH.search(part) for part in clause[:1] or [sentence])


def grounded(key: str, value: Any, cited: list[str]) -> bool:
    """Checks 1-3 of the module docstring for one item against the subject's lines it cites."""
    for line in cited:
        sentence = holding_sentence(value, line)
        if sentence is None:
            continue
        if _QUESTION.search(sentence) or _HYPOTHETICAL.search(sentence):
            continue
        if about_someone_else(key, sentence):
            continue
        return True
    return False


def keep_grounded(items: list[Any], said: dict[int, str]) -> list[Any]:
    """The items (ExtractedItem) that pass every check, in order, against the subject's own lines by id."""
    kept: list[Any] = []
    seen: set[tuple[str, str]] = set()
    per_line: Counter[int] = Counter()
    for item in items:
        cited_ids = [i for i in item.source_message_ids if i in said]
        if not grounded(item.key, item.value, [said[i] for i in cited_ids]):
            continue
        identity = (item.key, fold(str(item.value)))
        if identity in seen or any(per_line[i] >= MAX_PER_LINE for i in cited_ids):
            continue
        seen.add(identity)
        per_line.update(cited_ids)
        kept.append(item)
    return kept
