"""Allergies, diets and what the user does not eat or drink, in English and Chinese.

- allergies: a list of what the user is allergic to ("I'm allergic to cats and dust", "I have a peanut
  allergy", 我对青霉素过敏, 我芒果过敏);
- diet: a named diet in the user's words ("vegetarian", "vegan", "gluten-free", "lactose intolerant",
  "halal", 吃素, 素食主义者); a later message naming another replaces it;
- food_avoid (a preference): a list of what the user never eats or drinks ("I don't eat pork", "I don't drink
  alcohol", 我不吃香菜, 我不太能吃辣).

Each pattern starts at the user (I, 我): "my sister is allergic to shellfish", 我姐姐对芒果过敏 and 他不吃香菜
are someone else's. The negation of "I don't eat" is the statement itself, so these findings skip the
negation guard only for the words they matched (the guard reads what comes before them).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from strataflow.llm.offline.text import OTHERS_ZH, Finding
from strataflow.textsearch import CJK

Rule = Callable[[str], Iterator[Finding]]
IGNORE = re.IGNORECASE
DEGREE_EN = r"(?:(?:very|severely|highly|mildly|slightly|deathly|really|so|also|quite|extremely|super)\s+)*"
ITEM_END_EN = r"(?=\s*(?:[,.;!?)]|$|\b(?:so|but|which|because|since|though|as well|too|and I|and we)\b))"
ITEM_EN = r"[a-z][\w'-]*(?:\s+[\w'-]+){0,3}?"
ITEMS_EN = rf"(?P<x>{ITEM_EN}(?:\s*(?:,|\band\b|\bor\b|&)\s*{ITEM_EN})*)"
NOT_ITEMS_EN = frozenset("it this that them something anything everything nothing stuff lots".split())
DIETS_EN = (
    r"vegetarian|vegan|pescatarian|pescetarian|flexitarian|plant[- ]based|keto|paleo|gluten[- ]free|"
    r"dairy[- ]free|lactose[- ]intolerant|gluten[- ]intolerant|coeliac|celiac|teetotal(?:er|ler)?|halal|"
    r"kosher|diabetic|a non-drinker|low[- ]carb|low[- ]sodium|sugar[- ]free"
)


# A comma part that is an aside ends the list: "I'm allergic to shellfish, by the way".
ASIDE_EN = re.compile(
    r"^(?:by the way|btw|apparently|actually|unfortunately|sadly|honestly|I think|I guess|I believe|though|"
    r"too|as well|also|then|now|lol|haha|fyi|just so you know|if that matters|it turns out)\b",
    IGNORE,
)


def _split_en(text: str) -> list[str]:
    items: list[str] = []
    for part in (p.strip(" .") for p in re.split(r"\s*(?:,|\band\b|\bor\b|&)\s*", text)):
        if ASIDE_EN.match(part):
            break
        if part and part.lower() not in NOT_ITEMS_EN:
            items.append(re.sub(r"^(?:the|a|an|any|all|most)\s+", "", part))
    return items


def allergies_en(sentence: str) -> Iterator[Finding]:
    patterns = (
        rf"\bI(?:'m|\s+am|'ve\s+been|\s+have\s+been|\s+was\s+born)\s+{DEGREE_EN}allergic\s+to\s+{ITEMS_EN}{ITEM_END_EN}",
        r"\bI\s+(?:have|'ve\s+got|have\s+got|got|suffer\s+from)\s+(?:an?\s+)?(?:(?:severe|mild|bad|serious|slight|"
        r"terrible|nasty|life-threatening|deadly)\s+)?(?P<x>[a-z][\w-]*(?:\s+[a-z][\w-]*)?)\s+allerg(?:y|ies)\b",
        rf"\bI\s+(?:have|'ve\s+got|have\s+got|got)\s+(?:an?\s+)?(?:\w+\s+)?allerg(?:y|ies)\s+to\s+{ITEMS_EN}{ITEM_END_EN}",
        rf"\bmy\s+allerg(?:y|ies)\s+(?:is|are|include|includes)\s+{ITEMS_EN}{ITEM_END_EN}",
    )
    for pattern in patterns:
        for match in re.finditer(pattern, sentence, IGNORE):
            items = [item for item in _split_en(match.group("x")) if item.lower() not in ("severe", "food")]
            if items:
                yield Finding("fact", "allergies", items, match.span(), category="health")
                return


def diet_en(sentence: str) -> Iterator[Finding]:
    patterns = (
        rf"\bI(?:'m|\s+am|'ve\s+been|\s+have\s+been|\s+went|\s+turned|\s+became)\s+(?:an?\s+)?"
        rf"(?:(?:strict|mostly|fully|now|also|completely|totally|entirely|pretty\s+much)\s+)*(?P<d>{DIETS_EN})\b",
        rf"\bI\s+(?:eat|follow|keep|'m\s+on|am\s+on|stick\s+to|only\s+eat)\s+(?:an?\s+)?(?:strict\s+)?"
        rf"(?P<d>{DIETS_EN})(?:\s+(?:diet|food|meals))?\b",
    )
    for pattern in patterns:
        for match in re.finditer(pattern, sentence, IGNORE):
            diet = match.group("d").lower().removeprefix("a ")
            yield Finding("fact", "diet", diet, match.span(), category="health")
            return


def avoid_en(sentence: str) -> Iterator[Finding]:
    pattern = (
        rf"\bI\s+(?:don't|do\s+not|never|can't|cannot|can\s+not|won't|no\s+longer|stopped|quit|gave\s+up)\s+"
        rf"(?:ever\s+)?(?:eat(?:ing)?|drink(?:ing)?|touch|have)\s+(?:any\s+)?{ITEMS_EN}"
        rf"(?=\s*(?:[,.;!?)]|$|\b(?:anymore|any\s*more|at all|because|since|so|but|though|as well|either|"
        rf"now|these days)\b))"
    )
    for match in re.finditer(pattern, sentence, IGNORE):
        items = _split_en(match.group("x"))
        if items and not re.match(r"(?:much|enough|time|to|a lot|the)\b", items[0], IGNORE):
            yield Finding("preference", "food_avoid", items, match.span(), guards=AVOID_GUARDS)
            return


AVOID_GUARDS = frozenset({"question", "others", "modal"})  # the negation is what they say
SELF_ZH = (
    r"(?:^|(?<=[，,：:；;]))\s*(?:我|本人)(?:本人)?(?:也|还|从小|一直|平时|从来|基本上?|有点|比较|特别|严重)*"
)
ITEM_ZH = rf"[{CJK}A-Za-z]{{1,8}}?"
DIETS_ZH = (
    r"吃素|全素|纯素|素食主义者|素食者|素食|吃清真|清真|吃斋|乳糖不耐受?|麸质不耐受?|不吃肉|生酮饮食|低碳饮食"
)


def _split_zh(text: str) -> list[str]:
    return [p for p in re.split(r"[和、跟与及]|还有", text) if p and not re.fullmatch(r"东西|什么|啥", p)]


def allergies_zh(sentence: str) -> Iterator[Finding]:
    patterns = (
        rf"{SELF_ZH}(?:对|有)(?P<x>{ITEM_ZH}(?:[和、跟与及]{ITEM_ZH})*)(?:有点|有些|轻微|严重|比较|特别)?过敏",
        rf"{SELF_ZH}(?P<x>(?!对|有){ITEM_ZH}(?:[和、跟与及]{ITEM_ZH})*)(?:有点|有些|轻微|严重|比较|特别)?过敏",
        rf"{SELF_ZH}(?:是)?(?P<x>{ITEM_ZH})过敏(?:体质|的人)",
    )
    for pattern in patterns:
        for match in re.finditer(pattern, sentence):
            items = _split_zh(match.group("x"))
            if items and not OTHERS_ZH.match(items[0]) and not re.search(r"[不没]", match.group("x")):
                yield Finding("fact", "allergies", items, match.span(), category="health")
                return


def diet_zh(sentence: str) -> Iterator[Finding]:
    for match in re.finditer(rf"{SELF_ZH}(?:是|是个|是一个|是一名)?(?P<d>{DIETS_ZH})(?:的|者)?", sentence):
        yield Finding("fact", "diet", match.group("d"), match.span(), category="health")
        return


def avoid_zh(sentence: str) -> Iterator[Finding]:
    pattern = (
        rf"{SELF_ZH}(?:不|不太|不怎么|从不|从来不|绝不|完全不|一点都不|一点也不|不能|不太能|没法|不敢|戒了|不再)"
        rf"(?:能|敢|会)?(?P<v>吃|喝|碰|沾)(?P<x>{ITEM_ZH}(?:[和、跟与及]{ITEM_ZH})*)(?:的东西|的|了)?(?=[，,。！!；;\s]|$|也|和)"
    )
    for match in re.finditer(pattern, sentence):
        items = _split_zh(match.group("x"))
        if items and not re.fullmatch(r"饭|东西|早饭|早餐|午饭|晚饭|药", items[0]):
            yield Finding("preference", "food_avoid", items, match.span(), guards=AVOID_GUARDS)
            return


EN_RULES: tuple[Rule, ...] = (allergies_en, diet_en, avoid_en)
ZH_RULES: tuple[Rule, ...] = (allergies_zh, diet_zh, avoid_zh)
