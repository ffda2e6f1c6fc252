"""Whether a small model's item is grounded in the subject's own words: general checks on the answer of the
small prompt profile (extract_prompt_small.py), never fitted to a case.

A 0.5B-1.5B model invents values, copies the instructions' example (Tom, a chef in Berlin), takes facts from
questions and "if" sentences, from the assistant's turns, and gives the subject a relative's job. A strong
model's answer (the full profile) and the offline rules normalise values (a diet from "I don't eat meat") and
are not checked this way. An item is kept when:

1. its value is in a line of the subject's it cites (not an assistant turn): a text value as written
   (case-insensitive, ignoring spaces and punctuation), or each of its words (Latin: words of 2+ letters;
   Chinese, which has no spaces: every CJK character); a number when the sentence states that number, with
   its unit or without (digits, Chinese numerals, English number words: "年薪80万" gives 800000 or 80,
   "70k" 70000 or 70, never 700000);
2. the sentence holding the value is not a question or a hypothetical ("if", "suppose", 如果, 假如, 吗?);
3. a fact about the subject (any key but person_*, family and pets) is not stated of someone else in that
   sentence ("my sister is a doctor", 我姐姐是医生); a person_<who> item names someone of the sentence: <who>
   is a word of it, or the relation it names ("我室友是素食主义者。" makes person_sister person_roommate,
   the small prompt's example key copied), and with nobody named the item is left out;
   a like or a dislike comes from a sentence with a word of liking or a negation (LIKING: a few verbs and the
   closed class of negations, not phrases), not from any sentence under a key the model falls back to
   ("dislikes: electrician" from "I work as an electrician.");
4. its value is not the sentence itself: a value is a name, a place, a word or a number, and a line echoed
   as a value ("谢谢，帮大忙了。" under key "text") says nothing about the subject;
5. it is not a repeat (same key and value) and its line has not already given line_item_limit(line) items:
   a line states at most one fact per clause or per WORDS_A_FACT words, and one more; a small model that
   lists more is enumerating the keys its prompt showed it.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from strataflow.llm.offline.numbers import EN_NUMBER, NUMBER, with_unit

WORDS_A_FACT = 4  # two CJK characters count as a word
ECHO_SHARE = 0.8  # a value holding this much of its sentence (of ECHO_MIN_CHARS or more) is the sentence
ECHO_MIN_CHARS = 6
_CLAUSE_BREAK = re.compile(r"[,，;；。.!?！？:：、]+|\b(?:and|but)\b")
_WORD = re.compile(r"[^\W\d_]+|\d+")
FAMILY_KEYS = frozenset({"children", "spouse", "pets", "family", "marital_status", "partner", "parents"})
SENTIMENT_KEYS = frozenset({"likes", "dislikes"})
LIKING = re.compile(  # a dislike is mostly a negation: "I don't eat pork", 我不太能吃辣, 我乳糖不耐受
    r"\b(?:like|love|enjoy|prefer|fan|favou?rite|into|hate|dislike|stand|avoid|allergic|keen|not|never|no)\b|n't"
    r"|喜欢|爱|迷|讨厌|怕|烦|不|没|别|忌|过敏",
    re.IGNORECASE,
)
RELATIONS_ZH = {  # what a Chinese relation word is called in a person_<who> key
    "姐姐": "sister", "妹妹": "sister", "姐": "sister", "妹": "sister", "哥哥": "brother", "弟弟": "brother",
    "哥": "brother", "弟": "brother", "妈妈": "mother", "母亲": "mother", "妈": "mother", "爸爸": "father",
    "父亲": "father", "爸": "father", "老婆": "wife", "妻子": "wife", "太太": "wife", "老公": "husband",
    "丈夫": "husband", "先生": "husband", "儿子": "son", "女儿": "daughter", "朋友": "friend",
    "同事": "colleague", "老板": "boss", "领导": "boss", "经理": "manager", "室友": "roommate",
    "邻居": "neighbour", "孩子": "child", "父母": "parents", "爸妈": "parents", "爷爷": "grandfather",
    "奶奶": "grandmother", "外公": "grandfather", "外婆": "grandmother", "表哥": "cousin", "表姐": "cousin",
    "堂哥": "cousin", "堂姐": "cousin", "男朋友": "boyfriend", "女朋友": "girlfriend", "对象": "partner",
}  # fmt: skip
_STATED_NUMBER = re.compile(
    rf"({NUMBER}|\b{EN_NUMBER}\b)\s*(万|千|亿|k\b|m\b|thousand\b|million\b)?", re.IGNORECASE
)
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
_RELATION_ZH = re.compile("|".join(sorted(RELATIONS_ZH, key=len, reverse=True)))
# another person the sentence is about: a relation word (not 经理, also a job the subject may hold: 我是经理)
_OTHER_ZH = re.compile(
    "|".join(w for w in sorted(RELATIONS_ZH, key=len, reverse=True) if w != "经理") + "|^[^我]*[他她]"
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


def stated_numbers(text: str) -> set[float]:
    """Every number the text states, with its unit and without ("年薪80万" {80, 800000})."""
    numbers: set[float] = set()
    for match in _STATED_NUMBER.finditer(text):
        for unit in {match.group(2), None}:
            number = with_unit(match.group(1), unit)
            if number is not None:
                numbers.add(float(number))
    return numbers


def number_value(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(str(value).replace(",", "").strip())
    except ValueError:
        return None


def states_number(value: Any, sentence: str) -> bool:
    """Whether the sentence states the number; a value that is not one plain number (a range "30-35", "30+")
    only needs a number in it."""
    number = number_value(value)
    if number is None:
        return bool(_NUMBER.search(sentence))
    return any(abs(number - stated) < 1e-6 for stated in stated_numbers(sentence))


def holding_sentence(value: Any, line: str) -> str | None:
    """The sentence of the line that holds the value (None: the value is not in the line)."""
    text = value_text(value)
    for sentence in sentences(line):
        if text is None:
            if states_number(value, sentence):
                return sentence
        elif found_in(text, sentence):
            return sentence
    if text is not None and found_in(text, line):
        return line  # the value spans sentences ("Leo and Maya. ...")
    return None


def line_item_limit(line: str) -> int:
    """How many items one of the subject's lines can state: one a clause or one every WORDS_A_FACT words,
    whichever is more, and one more ("I moved to Lisbon in March and I work as a data engineer at
    Quintessa." 4, "我在苏州工作。" 2)."""
    clauses = sum(1 for part in _CLAUSE_BREAK.split(line) if part.strip())
    words = len(_WORD.findall(_CJK.sub(" ", line))) + len(_CJK.findall(line)) / 2
    return 1 + max(clauses, int(words // WORDS_A_FACT))


def echoes(value: Any, sentence: str) -> bool:
    """Whether a text value is (nearly) the whole sentence it was found in."""
    text = value_text(value)
    if text is None:
        return False
    whole = fold(sentence)
    return len(whole) >= ECHO_MIN_CHARS and len(fold(text)) >= ECHO_SHARE * len(whole)


def relations(sentence: str) -> list[str]:
    """The relations the sentence names, as person_<who> keys call them ("my roommate" roommate, 我室友
    roommate), in the order they appear."""
    found = [(m.start(), m.group(0).lower().rstrip("s")) for m in re.finditer(_RELATIONS_EN, sentence, re.I)]
    found += [(m.start(), RELATIONS_ZH[m.group(0)]) for m in _RELATION_ZH.finditer(sentence)]
    return [who for _, who in sorted(found)]


def person_key(key: str, sentence: str) -> str | None:
    """The person_<who> key of someone the sentence names: the key when <who> is a word of the sentence or a
    relation it names, else the first relation it names; None when it names nobody."""
    who = key.removeprefix("person_").replace("_", " ")
    named = relations(sentence)
    if who and (who in sentence.lower() or who.rstrip("s") in named):
        return key
    return f"person_{named[0]}" if named else None


def says_liking(key: str, sentence: str) -> bool:
    return key not in SENTIMENT_KEYS or bool(LIKING.search(sentence))


def about_someone_else(key: str, sentence: str) -> bool:
    if key.startswith("person_") or key in FAMILY_KEYS:
        return False
    clause = re.split(r"[,，、]", sentence)
    return any(_OTHER_EN.search(part) or _OTHER_ZH.search(part) for part in clause[:1] or [sentence])


def grounded_key(key: str, value: Any, cited: list[str]) -> str | None:
    """Checks 1-4 of the module docstring for one item against the subject's lines it cites: the key the
    item is kept under (a person_<who> key names the person the sentence names), or None."""
    for line in cited:
        sentence = holding_sentence(value, line)
        if sentence is None:
            continue
        if _QUESTION.search(sentence) or _HYPOTHETICAL.search(sentence):
            continue
        if about_someone_else(key, sentence) or echoes(value, sentence) or not says_liking(key, sentence):
            continue
        kept = person_key(key, sentence) if key.startswith("person_") else key
        if kept is not None:
            return kept
    return None


def keep_grounded(items: list[Any], said: dict[int, str]) -> list[Any]:
    """The items (ExtractedItem) that pass every check, in order, against the subject's own lines by id."""
    kept: list[Any] = []
    seen: set[tuple[str, str]] = set()
    per_line: Counter[int] = Counter()
    for item in items:
        cited_ids = [i for i in item.source_message_ids if i in said]
        key = grounded_key(item.key, item.value, [said[i] for i in cited_ids])
        if key is None:
            continue
        identity = (key, fold(str(item.value)))
        if identity in seen or any(per_line[i] >= line_item_limit(said[i]) for i in cited_ids):
            continue
        seen.add(identity)
        per_line.update(cited_ids)
        kept.append(item if key == item.key else item.model_copy(update={"key": key}))
    return kept
