"""The people and animals of the user's household, by name, in English and Chinese.

- family_members: [{"relation", "name"}] from "my son Arlo", "my daughter's name is Ivy", "I've got two kids,
  Leo and Maya", 我儿子叫乐乐, 我有两个孩子，一个叫果果，一个叫豆包 (ages of relatives: rules_family).
- pets: [{"species", "name"?, "count"?}] from "I have a dog named Rex", "We have two cats, Salt and Pepper",
  "my cat is called Noodle", 我养了一条狗，叫旺财, 家里养了两只猫，一只叫花花，一只叫点点.

The owner is always said: I/we/my/our, 我/我家/我们家/家里 right before the relative or the animal, so
"my friend's dog", "her cat" and 我朋友养了一条狗 are not the user's. A question, a negation or a
hypothetical ("If I had a cat I'd call her Luna", 要是我养狗) gives nothing (the engine's guards).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from strataflow.llm.offline.numbers import EN_NUMBER, NUMBER, parse_quantity
from strataflow.llm.offline.text import Finding
from strataflow.textsearch import CJK

Rule = Callable[[str], Iterator[Finding]]
IGNORE = re.IGNORECASE
GUARDS = frozenset({"question", "negation", "modal"})  # the relative is the clause's subject: not "others"

NAME_EN = r"[A-Z][a-z]+(?:-[A-Z][a-z]+)?"
NAMES_EN = rf"{NAME_EN}(?:\s*,\s*{NAME_EN})*(?:,?\s+(?:and|&)\s+{NAME_EN})?"
NOT_NAMES_EN = frozenset(
    "I The A An And But So My Our He She It They We You Just Now Today Yesterday Tomorrow Also Still Both "
    "Mom Mum Dad Mommy Daddy Baby Honey Sweetie Is Was Has Had Who Which That This Then".split()
)
RELATION_EN = {
    "son": "son", "sons": "son", "boy": "son", "boys": "son", "daughter": "daughter", "daughters": "daughter",
    "girl": "daughter", "girls": "daughter", "kid": "child", "kids": "child", "child": "child",
    "children": "child", "baby": "child", "twins": "child", "stepson": "stepson",
    "stepdaughter": "stepdaughter",
    "wife": "wife", "husband": "husband", "partner": "partner", "fiancé": "fiancé", "fiancée": "fiancée",
    "fiance": "fiancé", "fiancee": "fiancée", "boyfriend": "boyfriend", "girlfriend": "girlfriend",
    "brother": "brother", "brothers": "brother", "sister": "sister", "sisters": "sister", "mom": "mother",
    "mum": "mother", "mother": "mother", "dad": "father", "father": "father", "grandson": "grandson",
    "granddaughter": "granddaughter", "grandma": "grandmother", "grandpa": "grandfather",
}  # fmt: skip
RELATION_WORD_EN = "|".join(sorted(RELATION_EN, key=len, reverse=True))
FAMILY_ADJ_EN = r"(?:(?:little|baby|eldest|oldest|youngest|older|younger|big|twin|teenage|new|lovely)\s+)?"
COUNT_EN = rf"(?:\d{{1,2}}|{EN_NUMBER}|an?|one)"
SPECIES_EN = (
    r"dogs?|pupp(?:y|ies)|cats?|kittens?|kitty|rabbits?|bunn(?:y|ies)|hamsters?|guinea pigs?|gerbils?|"
    r"parrots?|budgies?|budgerigars?|parakeets?|cockatiels?|canar(?:y|ies)|birds?|goldfish|fish|turtles?|"
    r"tortoises?|snakes?|lizards?|geckos?|iguanas?|horses?|ponies|pony|ferrets?|chinchillas?|rats?|mice|"
    r"mouse|hedgehogs?|chickens?|hens?|goats?|"
    r"(?:[a-z]+\s+)?(?:retrievers?|labradors?|poodles?|doodles?|beagles?|terriers?|collies?|spaniels?|"
    r"huskies|husky|corgis?|pugs?|dachshunds?|bulldogs?|shepherds?|chihuahuas?|greyhounds?|whippets?|"
    r"schnauzers?|rottweilers?|dobermans?|shih tzus?|malamutes?|tabb(?:y|ies)|siamese|persians?|"
    r"ragdolls?|maine coons?|sphynx)"
)
PET_ADJ_EN = (
    r"(?:(?:little|big|huge|tiny|old|young|new|rescue|black|white|ginger|grey|gray|brown|fluffy)\s+)*"
)
PRONOUN_NAME_EN = rf"(?:,\s*|\s+and\s+)(?:his|her|its|their)\s+names?\s+(?:is|are|'s)\s+(?P<also>{NAMES_EN})"
NOT_A_PET_EN = (
    r"(?!\s*(?:allerg\w*|hair|fur|food|litter|sitter|walker|bowl|bed|toys?|tank|cage|door|flap|person|people|"
    r"lover|show|tree|nap|videos?|memes?|café|cafe)\b)"
)


def _names_en(text: str) -> list[str]:
    names = re.findall(NAME_EN, text)
    return [n for n in names if n not in NOT_NAMES_EN]


def _count(word: str) -> int | None:
    if word.lower() in ("a", "an", "one"):
        return 1
    quantity = parse_quantity(word)
    return quantity.value if quantity and isinstance(quantity.value, int) else None


def _singular(species: str) -> str:
    species = species.lower()
    for plural, single in (("puppies", "puppy"), ("bunnies", "bunny"), ("ponies", "pony"), ("mice", "mouse"),
                           ("huskies", "husky"), ("canaries", "canary"), ("tabbies", "tabby")):  # fmt: skip
        if species.endswith(plural):
            return species[: -len(plural)] + single
    if species.endswith("s") and not species.endswith(("ss", "sphynx", "siamese")):
        return species[:-1]
    return species


def family_names_en(sentence: str) -> Iterator[Finding]:
    members: list[dict[str, Any]] = []
    start = end = None
    name_after = rf"(?:'s\s+name\s+is\s+|\s+is\s+(?:named|called)\s+|,?\s+)(?P<name>{NAME_EN})\b"
    for match in re.finditer(rf"\b(?i:my|our)\s+{FAMILY_ADJ_EN}(?P<rel>(?i:{RELATION_WORD_EN})){name_after}",
                             sentence):  # fmt: skip
        if match.group("name") not in NOT_NAMES_EN:
            members.append({"relation": RELATION_EN[match.group("rel").lower()], "name": match.group("name")})
            start, end = match.start() if start is None else start, match.end()
    have = (
        rf"\b(?i:I|we)(?:\s+|(?='))(?i:have|'ve got|have got|got|had|also have|just had)\s+"
        rf"(?P<n>(?i:{COUNT_EN}))\s+{FAMILY_ADJ_EN}(?P<rel>(?i:{RELATION_WORD_EN}))"
        rf"(?:\s*[,:]\s*|\s+(?i:named|called)\s+)(?P<names>{NAMES_EN})"
    )
    for match in re.finditer(have, sentence):
        relation = RELATION_EN[match.group("rel").lower()]
        members += [{"relation": relation, "name": name} for name in _names_en(match.group("names"))]
        start, end = match.start() if start is None else start, match.end()
        # "a son, Mateo, and a daughter, Lucia": the pairs that follow
        pairs = rf",?\s+and\s+(?:an?|one)\s+(?P<rel>(?i:{RELATION_WORD_EN})),?\s+(?P<name>{NAME_EN})"
        for pair in re.finditer(pairs, sentence[match.end() :]):
            members.append({"relation": RELATION_EN[pair.group("rel").lower()], "name": pair.group("name")})
            end = match.end() + pair.end()
    unique = list({(m["relation"], m["name"]): m for m in members}.values())
    if unique and start is not None and end is not None:
        yield Finding("fact", "family_members", unique, (start, end), category="family", guards=GUARDS)


def pets_en(sentence: str) -> Iterator[Finding]:
    owned = (
        rf"\b(?i:I|we)(?:\s+|(?='))(?i:(?:also\s+|just\s+)?(?:have|'ve got|have got|got|own|keep|adopted|"
        rf"rescued))\s+(?P<n>(?i:{COUNT_EN}))\s+{PET_ADJ_EN}(?P<s>(?i:{SPECIES_EN}))\b{NOT_A_PET_EN}"
        rf"(?:(?:\s*,\s*|\s+(?i:named|called)\s+|\s*:\s*)(?P<names>{NAMES_EN})|{PRONOUN_NAME_EN})?"
    )
    mine = (
        rf"\b(?i:my|our)\s+{PET_ADJ_EN}(?P<s>(?i:{SPECIES_EN}))(?:'s\s+name\s+is\s+|\s+is\s+(?:named|called)\s+|"
        rf"\s+(?=[A-Z])|\s+is\s+an?\s+[a-z]+(?:\s+[a-z]+)?\s+(?:named|called)\s+)(?P<names>{NAMES_EN})"
    )
    for pattern in (owned, mine):
        for match in re.finditer(pattern, sentence):
            species = _singular(match.group("s"))
            names = _names_en(match.group("names") or match.groupdict().get("also") or "")
            breed = re.search(r"\bis\s+an?\s+(?P<b>[a-z]+(?:\s+[a-z]+)?)\s+(?:named|called)", match.group(0))
            if breed:
                species = breed.group("b")
            if names:
                value: list[dict[str, Any]] = [{"species": species, "name": name} for name in names]
            else:
                count = _count(match.groupdict().get("n") or "a")
                value = [{"species": species, **({"count": count} if count and count > 1 else {})}]
            yield Finding("fact", "pets", value, match.span(), category="family", guards=GUARDS)
            return


RELATION_ZH = (
    r"儿子|女儿|闺女|孩子|小孩|宝宝|大宝|二宝|老大|老二|老三|老公|老婆|丈夫|妻子|爱人|媳妇|先生|太太|对象|男朋友|女朋友|"
    r"哥哥|姐姐|弟弟|妹妹|爸爸|妈妈|父亲|母亲|爷爷|奶奶|外公|外婆|孙子|孙女"
)
OWNER_ZH = r"(?:我|我的|我家|我家的|我们家|我们家的|家里|家里的)"
COUNTER_ZH = r"(?:只|条|个|头|匹|尾)"
SPECIES_ZH = (
    r"狗狗|小狗|狗|猫咪|小猫|猫|兔子|小兔|仓鼠|鹦鹉|小鸟|鸟|乌龟|金鱼|鱼|蜥蜴|蛇|刺猬|龙猫|荷兰猪|"
    r"柯基|金毛|泰迪|哈士奇|柴犬|拉布拉多|边牧|比熊|博美|萨摩耶|雪纳瑞|法斗|斗牛犬|德牧|阿拉斯加|"
    r"英短|美短|布偶|橘猫|狸花猫|暹罗猫|加菲猫|蓝猫|田园犬|土狗"
)
NAME_ZH = rf"(?P<name>[{CJK}]{{1,4}}?|[A-Z][a-z]+)(?=[，,。！!；;、\s]|$|和|还有|今年|已经|是|特别|很)"
CALLED_ZH = r"(?:名字叫|名叫|叫做|叫)"
MORE_ZH = rf"(?:一{COUNTER_ZH}|另一{COUNTER_ZH}|另外一{COUNTER_ZH}|一个|另一个|老二|老三|二宝|小的|大的)"


def _names_zh(text: str) -> list[str]:
    """Every name after 叫 in a stretch of text (一个叫果果，一个叫豆包)."""
    return [name for _, name in _named_zh(text)]


def _named_zh(text: str) -> list[tuple[str, str]]:
    """(the word before 叫, the name) for every name in a stretch of text (老二叫妞妞 -> 老二, 妞妞)."""
    found = re.finditer(rf"(?P<who>{MORE_ZH})?{CALLED_ZH}\s*{NAME_ZH}", text)
    return [(m.group("who") or "", m.group("name")) for m in found if _is_name_zh(m.group("name"))]


def _is_name_zh(name: str) -> bool:
    return not re.fullmatch(r"(?:什么|啥|他|她|它|我|你|这个|那个|名字)", name)


def family_names_zh(sentence: str) -> Iterator[Finding]:
    pattern = (
        rf"(?:^|(?<=[，,：:；;]))\s*{OWNER_ZH}(?:有(?:{NUMBER}|俩)?个?)?\s*(?P<rel>{RELATION_ZH})"
        rf"(?:的名字)?[，,]?\s*{CALLED_ZH}\s*{NAME_ZH}"
    )
    counted = (
        rf"(?:^|(?<=[，,：:；;]))\s*{OWNER_ZH}?有(?P<n>{NUMBER}|俩)个(?P<rel>{RELATION_ZH})[，,]"
        rf"(?P<rest>(?:\s*{MORE_ZH}{CALLED_ZH}[^，,。；;]+[，,]?)+)"
    )
    members: list[dict[str, Any]] = []
    span: tuple[int, int] | None = None
    for match in re.finditer(pattern, sentence):
        if _is_name_zh(match.group("name")):
            members.append({"relation": match.group("rel"), "name": match.group("name")})
            span = span or match.span()
            tail = sentence[match.end() :]
            if re.match(rf"[，,]\s*{MORE_ZH}{CALLED_ZH}", tail):  # 老大叫壮壮，老二叫妞妞
                more = re.match(rf"(?:[，,]\s*{MORE_ZH}{CALLED_ZH}[^，,。；;]+)+", tail)
                for who, name in _named_zh(more.group(0) if more else ""):
                    relation = who if re.fullmatch(r"老[二三四]|[二三]宝", who) else match.group("rel")
                    members.append({"relation": relation, "name": name})
    for match in re.finditer(counted, sentence):
        members += [{"relation": match.group("rel"), "name": n} for n in _names_zh(match.group("rest"))]
        span = span or match.span()
    unique = list({(m["relation"], m["name"]): m for m in members}.values())
    if unique and span is not None:
        yield Finding("fact", "family_members", unique, span, category="family", guards=GUARDS)


def pets_zh(sentence: str) -> Iterator[Finding]:
    keep = rf"(?:^|(?<=[，,：:；;]))\s*{OWNER_ZH}(?:里)?(?:现在|也|还|一共|目前)?(?:养了|养着|养|有)(?:了)?"
    pattern = (
        rf"(?:{keep}\s*(?P<n>{NUMBER}|俩)?\s*{COUNTER_ZH}?|(?:^|(?<=[，,：:；;]))\s*{OWNER_ZH}(?:的)?)"
        rf"(?P<s>{SPECIES_ZH})"
    )
    for match in re.finditer(pattern, sentence):
        rest = re.match(r"[^。；;！!？?]*", sentence[match.end() :])
        after = rest.group(0) if rest else ""
        names = [n for n in _names_zh(after) if not re.fullmatch(SPECIES_ZH, n)]
        if not names and not match.group("n") and "养" not in match.group(0) and "有" not in match.group(0):
            continue  # 我家的狗 with no name and no having: nothing stated about it
        species = match.group("s")
        if names:
            value: list[dict[str, Any]] = [{"species": species, "name": name} for name in names]
        else:
            count = parse_quantity("两" if match.group("n") == "俩" else match.group("n") or "一")
            number = count.value if count and isinstance(count.value, int) else 1
            value = [{"species": species, **({"count": number} if number > 1 else {})}]
        end = match.end() + len(after) if names else match.end()
        yield Finding("fact", "pets", value, (match.start(), end), category="family", guards=GUARDS)
        return


EN_RULES: tuple[Rule, ...] = (family_names_en, pets_en)
ZH_RULES: tuple[Rule, ...] = (family_names_zh, pets_zh)
