"""Family said directly or in passing, in Chinese and English: a spouse or children mentioned on the way
("my wife and I", "我老婆", "孩子上小学了", "two kids"), the ages of relatives (never the user's age), and
how the family feels about a move (family_support).

A mention in passing is a weak finding: marital_status "married"/"已婚" from "my wife", children "1+" from
"my son" ("2+" from "my kids"); it never replaces a count or a status the user stated, nor a key already
stored (extract.extract_items). A stated count (两个孩子, "two kids") is an ordinary finding.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from strataflow.llm.offline.numbers import EN_NUMBER, NUMBER, decade_phrase, parse_quantity
from strataflow.llm.offline.text import Finding, clause_span

Rule = Callable[[str], Iterator[Finding]]
IGNORE = re.IGNORECASE
PASSING = frozenset({"question", "negation"})
SUPPORT_GUARDS = frozenset({"question"})

SPOUSE_ZH = r"老婆|老公|媳妇儿?|妻子|丈夫|太太|爱人|老伴|先生"
CHILD_ZH = r"孩子|小孩|娃|儿子|女儿|闺女|宝宝|大宝|二宝|老大|老二|小儿子|大儿子|小女儿|大女儿"
SECOND_CHILD_ZH = ("二宝", "老二", "大宝", "老大")  # naming the first or second child implies two
OWNER_ZH = (
    "我",
    "我的",
    "我家",
    "我家的",
    "我们家",
    "我们家的",
    "我和",
    "我跟",
    "我与",
    "跟",
    "和",
    "家里",
    "我家里",
)
THIRD_PARTY_ZH = re.compile(r"(他|她|你|朋友|同事|邻居|别人|人家|客户|老板|领导|同学|亲戚)的?$")
STAGE_ZH = (  # what a child is doing or how old: 孩子下个月上幼儿园, 儿子今年三岁
    r"(?:(?![的，,。])[^\s]){0,5}?(?:岁|上(?:学|了)?|读|念|出生|毕业|幼儿园|小学|初中|高中|大学|[一二三四五六]年级)"
)
AGE_ZH = rf"(?:今年|现在|已经|才|刚|刚满|满)?\s*(?P<q>{NUMBER}(?:多|几)?)\s*(?:周)?岁"


def _clause_before(sentence: str, start: int) -> str:
    clause_start, _ = clause_span(sentence, (start, start))
    return sentence[clause_start:start].strip()


def _owned_by_user_zh(sentence: str, start: int, word: str) -> bool:
    """The relative word at start is the user's: the clause opens with it, or with 我/我的/我和 before it."""
    before = _clause_before(sentence, start)
    if THIRD_PARTY_ZH.search(before):
        return False
    if word == "先生":  # 王先生 is a man's name; only 我先生 / 我家先生 is a husband
        return before.endswith(("我", "我家", "我的"))
    return not before or before.endswith(OWNER_ZH)


def family_zh(sentence: str) -> Iterator[Finding]:
    for match in re.finditer(r"前妻|前夫|前任老婆|前任老公", sentence):
        yield Finding(
            "fact", "marital_status", "离异", match.span(), category="family", guards=PASSING, weak=True
        )
    for match in re.finditer(r"亡妻|亡夫|(?:去世|过世)的(?:老婆|老公|妻子|丈夫|爱人|老伴)", sentence):
        yield Finding(
            "fact", "marital_status", "丧偶", match.span(), category="family", guards=PASSING, weak=True
        )
    for match in re.finditer(SPOUSE_ZH, sentence):
        if sentence[max(0, match.start() - 1) : match.start()] in ("前", "亡") or not _owned_by_user_zh(
            sentence, match.start(), match.group(0)
        ):
            continue
        yield Finding(
            "fact", "marital_status", "已婚", match.span(), category="family", guards=PASSING, weak=True
        )
        break
    count = (
        rf"(?:^|(?<=[，,：:；;]))\s*(?:我们?家)?(?:有)?\s*(?P<n>{NUMBER}|俩)\s*(?:个)?\s*"
        r"(?:孩子|小孩|娃|宝宝|子女|小朋友)"
    )
    for match in re.finditer(count, sentence):
        quantity = parse_quantity("两" if match.group("n") == "俩" else match.group("n"))
        if quantity and isinstance(quantity.value, int) and quantity.value < 15:
            yield Finding("fact", "children", quantity.value, match.span(), category="family", guards=PASSING)
    for match in re.finditer(r"(?:生了|有了|怀了)?(?:二胎|二孩|三胎)", sentence):
        value = 3 if "三" in match.group(0) else 2
        if "怀" not in match.group(0):
            yield Finding(
                "fact", "children", value, match.span(), category="family", guards=PASSING | {"modal"}
            )
    for match in re.finditer(CHILD_ZH, sentence):
        word = match.group(0)
        before = _clause_before(sentence, match.start())
        owned = before.endswith(OWNER_ZH) and not THIRD_PARTY_ZH.search(before)
        staged = not before and re.match(STAGE_ZH, sentence[match.end() :])
        if owned or staged:
            mention = "2+" if word in SECOND_CHILD_ZH else "1+"
            yield Finding(
                "fact", "children", mention, match.span(), category="family", guards=PASSING, weak=True
            )
            break
    yield from _relative_ages_zh(sentence)


def _relative_ages_zh(sentence: str) -> Iterator[Finding]:
    for match in re.finditer(
        rf"(?P<rel>{CHILD_ZH}|{SPOUSE_ZH}|爸爸|妈妈|父亲|母亲|爸|妈)(?:的年龄)?{AGE_ZH}", sentence
    ):
        if not _owned_by_user_zh(sentence, match.start(), match.group("rel")):
            continue
        quantity = parse_quantity(match.group("q"))
        if quantity is not None:
            member = {"relation": match.group("rel"), "age": quantity.value}
            yield Finding("fact", "family_members", [member], match.span(), category="family", guards=PASSING)


def support_zh(sentence: str) -> Iterator[Finding]:
    pattern = (
        r"(?P<who>家里人?|家人|父母|爸妈|老婆|老公|爱人|太太|媳妇|另一半|全家|家里老人)"
        r"(?:都|也|倒是|还|一直|对此|对这事)*"
        r"(?P<deg>挺|很|非常|特别|比较|十分|完全|都|不太|不是很|不怎么|并不|不)?"
        r"(?P<v>支持|赞成|同意|反对|犹豫|担心)"
    )
    for match in re.finditer(pattern, sentence):
        if not _owned_by_user_zh(sentence, match.start(), match.group("who")):
            continue
        degree, verb = match.group("deg") or "", match.group("v")
        value = f"{degree if degree.startswith(('不', '并不')) else ''}{verb}"
        yield Finding("fact", "family_support", value, match.span(), category="family", guards=SUPPORT_GUARDS)
        return


COUNT_EN = rf"(?:\d+|{EN_NUMBER})"
KID_EN = (
    r"(?:young\s+|little\s+|small\s+|grown\s+|adult\s+|teenage\s+)?"
    r"(?:kids|children|sons|daughters|boys|girls)"
)


def family_en(sentence: str) -> Iterator[Finding]:
    for pattern, value in (
        (r"\bmy\s+ex[- ]?(?:wife|husband|spouse)\b", "divorced"),
        (r"\bmy\s+late\s+(?:wife|husband|spouse)\b", "widowed"),
        (r"\bmy\s+fianc[ée]e?\b", "engaged"),
        (
            r"\bmy\s+(?:lovely\s+|dear\s+|better\s+half,?\s+)?(?:wife|husband|spouse|hubby)\b|"
            r"\b(?:wife|husband|spouse|hubby)\s+and\s+I\b",
            "married",
        ),
    ):
        match = re.search(pattern, sentence, IGNORE)
        if match:
            yield Finding(
                "fact", "marital_status", value, match.span(), category="family", guards=PASSING, weak=True
            )
            break
    for match in re.finditer(rf"(?:^|(?<=[,:;]))\W*(?P<n>{COUNT_EN})\s+{KID_EN}\b", sentence, IGNORE):
        quantity = parse_quantity(match.group("n"))
        if quantity and isinstance(quantity.value, int) and quantity.value < 15:
            yield Finding("fact", "children", quantity.value, match.span(), category="family", guards=PASSING)
    match = re.search(
        r"\b(?:my|our)\s+(?:(?:\d+|" + EN_NUMBER + r")[- ]year[- ]old|little one|toddler|newborn|baby|son|"
        r"daughter|kid|child|stepson|stepdaughter|(?P<many>kids|children|sons|daughters|twins))\b",
        sentence,
        IGNORE,
    )
    if match and not re.search(r"\b(?:expecting|due|pregnant)\b", sentence, IGNORE):
        value = ("2" if "twin" in match.group(0).lower() else "2+") if match.group("many") else "1+"
        yield Finding("fact", "children", value, match.span(), category="family", guards=PASSING, weak=True)
    yield from _relative_ages_en(sentence)


RELATIVE_EN = r"son|daughter|kid|boy|girl|wife|husband|partner|mom|mother|dad|father|brother|sister"


def _relative_ages_en(sentence: str) -> Iterator[Finding]:
    patterns = (
        rf"\bmy\s+(?P<rel>{RELATIVE_EN})\s+(?:is|'s|just turned|turned|will be|turns)\s+(?:now\s+)?"
        rf"(?P<q>\d{{1,3}}|{EN_NUMBER})(?!\s*(?:%|k\b|minutes|hours|days|weeks|months))",
        rf"\bmy\s+(?P<q>\d{{1,2}}|{EN_NUMBER})[- ]year[- ]old\s+(?P<rel>{RELATIVE_EN})\b",
        rf"\bmy\s+(?P<rel>{RELATIVE_EN})\s+is\s+in\s+(?:his|her|their)\s+(?P<d>(?:early|mid|late)?[\s-]*"
        rf"(?:twenties|thirties|forties|fifties|sixties|seventies|[2-9]0'?s))",
    )
    for pattern in patterns:
        for match in re.finditer(pattern, sentence, IGNORE):
            if match.groupdict().get("d"):
                age: object = decade_phrase(match.group("d"))
            else:
                quantity = parse_quantity(match.group("q"))
                age = quantity.value if quantity else None
            if age is not None:
                member = {"relation": match.group("rel").lower(), "age": age}
                yield Finding(
                    "fact", "family_members", [member], match.span(), category="family", guards=PASSING
                )


def support_en(sentence: str) -> Iterator[Finding]:
    who = r"(?:my|our)\s+(?:whole\s+)?(?P<who>family|parents|wife|husband|spouse|partner|folks|in-laws)"
    positive = (
        rf"\b{who}\s+(?:is|are|'s|'re|has been|have been)\s+(?:fully\s+|very\s+|really\s+|totally\s+|all\s+)*"
        r"(?P<v>supportive|on board|behind (?:me|us|it|the move|this)|for it|excited about it|fine with it)"
    )
    negative = (
        rf"\b{who}\s+(?:is|are|'s|'re)?\s*(?:not|n't|aren't|isn't|are not|is not)\s+(?:very\s+|really\s+|"
        r"too\s+|so\s+|that\s+)?(?P<v>keen|supportive|happy|thrilled|on board|convinced|sure)|"
        rf"\b{who.replace('who', 'who2')}\s+(?:is|are|'s|'re)\s+"
        r"(?P<v2>against|worried|unsure|hesitant|opposed)"
    )
    match = re.search(negative, sentence, IGNORE)
    if match:
        yield Finding(
            "fact", "family_support", "not supportive", match.span(), category="family", guards=SUPPORT_GUARDS
        )
        return
    match = re.search(positive, sentence, IGNORE)
    if match:
        yield Finding(
            "fact", "family_support", "supportive", match.span(), category="family", guards=SUPPORT_GUARDS
        )


ZH_RULES: tuple[Rule, ...] = (family_zh, support_zh)
EN_RULES: tuple[Rule, ...] = (family_en, support_en)
