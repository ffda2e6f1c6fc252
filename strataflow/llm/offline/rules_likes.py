"""Likes and dislikes said the ordinary ways the verb rules (rules_en_life / rules_zh_life preferences) do not
read: "I'm a big fan of jazz", "not a fan of cilantro", "I'm really into bouldering", "my favourite food is
ramen", "sushi is my favourite", 我爱吃饺子, 我讨厌下雨天, 我受不了烟味, 我最喜欢的水果是荔枝, 我的爱好是钓鱼.

Each gives preference_<topic> with {"prefers": X} or {"dislikes": X}; a favourite names its topic
("favourite food" -> preference_food). Patterns start at the user (I, 我, "my favourite"), so "my boss hates
cilantro" and 他讨厌香菜 are someone else's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from strataflow.llm.offline.text import Finding, slug
from strataflow.textsearch import CJK

Rule = Callable[[str], Iterator[Finding]]
IGNORE = re.IGNORECASE
GUARDS = frozenset({"question", "others", "modal"})
OBJECT_EN = (
    r"(?P<x>[^,.;!?]{2,50}?)(?=\s*(?:[,.;!?]|$)|\s+(?:but|because|though|although|while|since|so|and)\s+"
    r"(?:I|I'm|I've|we|my|it|that|they)\b|\s+(?:lately|these days|nowadays|anymore|honestly|really|tbh)\b)"
)
NOT_OBJECTS_EN = re.compile(r"^(?:it|this|that|them|those|these|one|yours?|his|hers|the idea|you)\b", IGNORE)
FAN = r"(?:an?\s+)?(?:(?:huge|big|massive|great|real|total|longtime|long-time|die-hard|lifelong)\s+)?fan\s+of"


def _value(verb_negative: bool, text: str) -> dict[str, Any]:
    return {"dislikes": text} if verb_negative else {"prefers": text}


def likes_en(sentence: str) -> Iterator[Finding]:
    lead = r"(?:^\W*|\bI(?:'m|\s+am)\s+)"
    patterns: tuple[tuple[str, bool | None], ...] = (
        (rf"{lead}{FAN}\s+{OBJECT_EN}", False),
        (rf"{lead}(?:not|never\s+been)\s+(?:a|much\s+of\s+a|the\s+biggest|really\s+a|a\s+big)\s+fan\s+of\s+{OBJECT_EN}",
         True),
        (r"\bI(?:'m|\s+am)\s+(?:(?:really|totally|so|pretty|very|quite|super|completely|kind\s+of|a\s+bit)\s+)*"
         rf"(?:into|obsessed\s+with|passionate\s+about|crazy\s+about|mad\s+about|hooked\s+on|addicted\s+to|keen\s+on|"
         rf"fond\s+of|a\s+sucker\s+for)\s+{OBJECT_EN}", False),
        (rf"\bI\s+(?:\w+ly\s+)?(?:adore|detest|loathe|despise|can't\s+bear|cannot\s+bear)\s+{OBJECT_EN}",
         None),
    )  # fmt: skip
    for pattern, negative in patterns:
        for match in re.finditer(pattern, sentence, IGNORE):
            thing = match.group("x").strip()
            if NOT_OBJECTS_EN.match(thing):
                continue
            dislike = negative if negative is not None else not re.search(r"adore", match.group(0), IGNORE)
            topic = slug(thing, 2)
            yield Finding(
                "preference", f"preference_{topic}", _value(dislike, thing), match.span(), guards=GUARDS
            )
    favourite = r"(?:all-time\s+|absolute\s+|very\s+)?favou?rite"
    for match in re.finditer(
        rf"\bmy\s+{favourite}\s+(?P<t>[a-z]+(?:\s+[a-z]+)?)\s+(?:is|are|has\s+to\s+be|would\s+be|'s)\s+{OBJECT_EN}",
        sentence, IGNORE,
    ):  # fmt: skip
        if not NOT_OBJECTS_EN.match(match.group("x")):
            value = {"prefers": match.group("x").strip()}
            yield Finding(
                "preference", f"preference_{slug(match.group('t'), 2)}", value, match.span(), guards=GUARDS
            )
    for match in re.finditer(
        rf"^\W*(?P<x>[\w'&-]+(?:\s+[\w'&-]+){{0,4}}?)\s+(?:is|are)\s+(?:(?:definitely|probably|still)\s+)?my\s+"
        rf"{favourite}(?:\s+(?P<t>[a-z]+))?\b", sentence, IGNORE,
    ):  # fmt: skip
        thing = match.group("x")
        if not NOT_OBJECTS_EN.match(thing) and not re.match(r"(?:what|which|who|where)\b", thing, IGNORE):
            topic = slug(match.group("t") or thing, 2)
            yield Finding(
                "preference", f"preference_{topic}", {"prefers": thing}, match.span(), guards=GUARDS
            )


SELF_ZH = r"(?:^|(?<=[，,：:；;]))\s*我(?:也|还|一直|从小|平时|真的|其实)*"
DEGREE_ZH = r"(?:最|特别|很|超|超级|非常|真的|挺|比较|蛮|十分|尤其|相当)*"
OBJECT_ZH = rf"(?P<x>[{CJK}A-Za-z0-9《》“”\"' ]{{1,16}}?)(?=[，,。！!；;？?…~]|$|了|啊|呀|呢|的时候)"
NOT_OBJECTS_ZH = re.compile(r"^(?:你|您|他|她|它|你们|他们|这|那|这个|那个|这样|那样|自己|大家|人家)")


def likes_zh(sentence: str) -> Iterator[Finding]:
    patterns = (
        (rf"{SELF_ZH}{DEGREE_ZH}(?:爱|热爱|迷上了?|沉迷于?|痴迷于?)(?![人好情心国护])(?:上了)?"
         rf"{OBJECT_ZH}", False),
        (rf"{SELF_ZH}{DEGREE_ZH}(?:讨厌|厌恶|反感|受不了|忍受不了|接受不了|不爱|最怕)(?![人])"
         rf"{OBJECT_ZH}", True),
        (rf"{SELF_ZH}的?(?:爱好|兴趣|兴趣爱好)(?:是|有|就是)\s*{OBJECT_ZH}", False),
    )  # fmt: skip
    for pattern, negative in patterns:
        for match in re.finditer(pattern, sentence):
            thing = match.group("x").strip()
            if NOT_OBJECTS_ZH.match(thing):
                continue
            yield Finding(
                "preference",
                f"preference_{slug(thing, 2)}",
                _value(negative, thing),
                match.span(),
                guards=GUARDS,
            )
    for match in re.finditer(
        rf"{SELF_ZH}?{DEGREE_ZH}(?:喜欢|爱)的(?P<t>[{CJK}A-Za-z]{{1,6}}?)(?:是|就是|要数|当属)\s*{OBJECT_ZH}",
        sentence,
    ):
        thing = match.group("x").strip("《》“”\"' ")
        if thing and not NOT_OBJECTS_ZH.match(thing):
            topic = slug(match.group("t"), 2)
            yield Finding(
                "preference", f"preference_{topic}", {"prefers": thing}, match.span(), guards=GUARDS
            )


EN_RULES: tuple[Rule, ...] = (likes_en,)
ZH_RULES: tuple[Rule, ...] = (likes_zh,)
