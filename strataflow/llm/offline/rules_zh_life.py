"""Chinese rules for family, name, tools, immigration plans, intents and preferences (see rules_zh)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from strataflow.llm.offline import aliases
from strataflow.llm.offline.numbers import NUMBER, parse_quantity
from strataflow.llm.offline.rules_zh import (
    CHANNELS,
    HOLD_CUE,
    INTENT_CUE,
    NUMQ,
    TIME_WORDS,
    _find,
)
from strataflow.llm.offline.text import (
    INTENT_GUARDS,
    Finding,
    cut,
    slug,
)
from strataflow.textsearch import CJK

Rule = Callable[[str], Iterator[Finding]]


def family(sentence: str) -> Iterator[Finding]:
    guards = frozenset({"question", "others"})
    statuses = (
        (r"已婚|已经结婚|结婚了|结婚(?:有)?" + NUMQ + r"年|成家了|有家庭了", "已婚"),
        (r"未婚|单身|还没结婚|没结婚|还没有结婚|没有结婚", "未婚"),
        (r"离异|离婚了|离了婚", "离异"),
        (r"丧偶", "丧偶"),
    )
    for pattern, value in statuses:
        for match in _find(pattern, sentence):
            yield Finding("fact", "marital_status", value, match.span(), category="family", guards=guards)
    for match in _find(
        rf"(?:有|生了|养了|带着|育有)\s*(?P<n>{NUMBER}|(?=个))\s*(?:个)?\s*(?:孩子|小孩|娃|宝宝|儿子|女儿|子女)",
        sentence,
    ):
        quantity = parse_quantity(match.group("n") or "一")
        if quantity and isinstance(quantity.value, int):
            yield Finding("fact", "children", quantity.value, match.span(), category="family", guards=guards)
    for match in _find(r"一儿一女|儿女双全|龙凤胎", sentence):
        yield Finding("fact", "children", 2, match.span(), category="family", guards=guards)
    for match in _find(r"(?:没有|没|还没|还没有|无|不要)(?:孩子|小孩|子女)|丁克|未育", sentence):
        yield Finding("fact", "children", 0, match.span(), category="family", guards=guards)


def name(sentence: str) -> Iterator[Finding]:
    for match in _find(
        rf"(?:我叫|我的名字是|我的名字叫|名字叫|我姓名是|本人叫|叫我|我姓[{CJK}][，,]?\s*(?:叫|名叫))\s*(?P<n>[{CJK}]{{2,4}}|"
        rf"[A-Z][a-zA-Z]+(?: "
        rf"[A-Z][a-zA-Z]+)?)",
        sentence,
    ):
        raw = match.group("n")
        if re.search(f"[{CJK}]", raw):
            tokens = cut(raw)
            raw = tokens[0] if len(tokens[0]) >= 2 else "".join(tokens[:2])[:4]
        yield Finding("fact", "name", raw, (match.start("n"), match.start("n") + len(raw)), category="basic")
    for match in _find(rf"(?:^|[，,。！!]\s*)我是(?P<n>[{CJK}]{{2,3}})(?=[，,。！!]|$)", sentence):
        candidate = match.group("n")
        if (
            not aliases.CITY_ZH.search(candidate)
            and not candidate.endswith("人")
            and _is_person_name(candidate)
        ):
            yield Finding("fact", "name", match.group("n"), match.span("n"), category="basic")


def _is_person_name(text: str) -> bool:
    import jieba.posseg as posseg

    pieces = posseg.lcut(text)
    return len(pieces) == 1 and pieces[0].flag.startswith("nr")


def tools(sentence: str) -> Iterator[Finding]:
    cue = re.search(r"(会用|使用|用|熟悉|精通|擅长|掌握|会|主要写|写|技术栈|工具|做过|开发过|上手)", sentence)
    names = aliases.tech_in(sentence[cue.start() :]) if cue else []
    everywhere = aliases.tech_in(sentence)
    if aliases.versioned(
        everywhere
    ):  # "We just moved to PostgreSQL 17": a version names a tool, no cue needed
        names, cue = everywhere, None
    if names:
        start = cue.start() if cue else sentence.find(names[0].split()[0])
        yield Finding(
            "fact", "tools", names, (max(start, 0), len(sentence.rstrip("。.!！ "))), category="career"
        )
    for match in _find(rf"擅长(?P<s>[{CJK}]{{2,8}}?)(?:和|、|，|,|。|$)", sentence):
        yield Finding("fact", "skills", [match.group("s")], match.span("s"), category="career")


SCORE_TESTS = {
    "雅思": "IELTS",
    "ielts": "IELTS",
    "托福": "TOEFL",
    "toefl": "TOEFL",
    "gre": "GRE",
    "gmat": "GMAT",
    "多邻国": "Duolingo",
    "duolingo": "Duolingo",
    "pte": "PTE",
}


def language_scores(sentence: str) -> Iterator[Finding]:
    names = "|".join(SCORE_TESTS)
    for match in _find(
        rf"(?i:(?P<test>{names}))\s*(?i:score\s+)?(?:考了|考到了?|是|有|成绩是?|is|of|:|：)?\s*(?P<s>\d{{1,3}}(?:\.\d)?)\s*分?",
        sentence,
    ):
        test = SCORE_TESTS[match.group("test").lower()]
        score = float(match.group("s"))
        yield Finding(
            "fact",
            "language_scores",
            {test: int(score) if score.is_integer() else score},
            match.span(),
            category="immigration",
        )


def wechat(sentence: str) -> Iterator[Finding]:
    for match in _find(
        r"(?i:微信号?|wechat(?: id)?)(?:是|为|:|：|\s)\s*(?P<w>[A-Za-z][\w-]{5,19})", sentence
    ):
        yield Finding(
            "fact",
            "wechat",
            match.group("w"),
            match.span("w"),
            category="basic",
            guards=frozenset({"question", "others"}),
        )


def immigration(sentence: str) -> Iterator[Finding]:
    programs = aliases.programs_in(sentence)
    if programs:
        held, wanted = HOLD_CUE.search(sentence), INTENT_CUE.search(sentence)
        if held and wanted and wanted.start() < held.start():  # 目标是拿到X: still a goal
            held = None
        if held:
            yield Finding(
                "fact", "current_visa", programs[0], (held.start(), len(sentence)), category="immigration"
            )
        elif wanted and not re.match(
            r"(?:一下|下)?(?:了解|咨询|问问?|看看|知道|打听)", sentence[wanted.end() :]
        ):
            yield Finding(
                "intent",
                "target_programs",
                programs,
                (wanted.start(), len(sentence)),
                category="immigration",
                guards=INTENT_GUARDS,
            )
    if programs or re.search(r"(移民|申请|办|去香港|来香港|搬)", sentence):
        for match in _find(TIME_WORDS, sentence):
            if INTENT_CUE.search(sentence) or programs:
                yield Finding(
                    "intent",
                    "timeline",
                    match.group(0),
                    match.span(),
                    category="immigration",
                    guards=INTENT_GUARDS,
                )
                break


INTENT_TOPIC_SKIP = re.compile(r"^(了解|问|咨询|知道|确认|说|看看|听听|请教|再|先|是)")


def intents(sentence: str) -> Iterator[Finding]:
    if aliases.programs_in(sentence):
        return
    for match in _find(
        r"(?:想|打算|计划|准备|希望|考虑)(?:要|着|在|把)?\s*(?P<x>[^，。；！？,;!?]{2,24})", sentence
    ):
        phrase = match.group("x").strip()
        if INTENT_TOPIC_SKIP.match(phrase):
            continue
        topic = re.sub(TIME_WORDS, "", phrase) or phrase
        yield Finding("intent", f"intent_{slug(topic, 2)}", phrase, match.span(), guards=INTENT_GUARDS)


def _topic_of_preference(text: str) -> str:
    lowered = text.lower()
    if any(word in lowered for word in CHANNELS):
        return "contact_method"
    if re.search(r"(上午|下午|晚上|早上|中午|周末|工作日|周[一二三四五六日])", text):
        return "contact_time"
    if re.search(r"(中文|英文|英语|普通话|粤语|广东话)", text):
        return "language"
    return slug(text, 2)


def _clean_object(text: str) -> str:
    return re.sub(r"^(用|通过|在|是|跟|和)", "", text.strip()).strip()


def preferences(sentence: str) -> Iterator[Finding]:
    guards = frozenset({"question", "others"})
    found: dict[str, Any] = {}
    for match in _find(
        r"比起(?P<y>[^，,。]{1,12}?)[，,]?\s*(?:我)?(?:更|还是)(?:喜欢|倾向于?|愿意|偏好)\s*(?P<x>[^，。；！？,;!?]{1,16})",
        sentence,
    ):
        found[match.group(0)] = (
            match.span(),
            {"prefers": _clean_object(match.group("x")), "over": _clean_object(match.group("y"))},
        )
    if not found:
        for match in _find(
            r"(?P<neg>不太|不是很|不怎么|没那么|不)?(?:喜欢|偏好|倾向于?|习惯|偏爱|更愿意)"
            r"(?:用|通过|在)?\s*(?P<x>[^，。；！？,;!?]{1,20})",
            sentence,
        ):
            obj = match.group("x")
            over = re.split(r"而不是|而非|不要|，不", obj)
            value: dict[str, Any] = (
                {"dislikes": _clean_object(over[0])}
                if match.group("neg")
                else {"prefers": _clean_object(over[0])}
            )
            if len(over) > 1 and not match.group("neg"):
                value["over"] = _clean_object(over[1])
            found[match.group(0)] = (match.span(), value)
    for match in _find(
        r"(?:请|最好|麻烦)?(?:用|通过|发)(?P<x>邮件|电话|微信|短信|WhatsApp|email)(?:联系|沟通|找|通知|发给)我",
        sentence,
    ):
        found.setdefault(match.group(0), (match.span(), {"prefers": match.group("x")}))
    by_topic: dict[str, tuple[tuple[int, int], dict[str, Any]]] = {}
    for span, value in found.values():
        subject = value.get("prefers") or value.get("dislikes") or ""
        if not subject:
            continue
        topic = _topic_of_preference(subject)
        if topic in by_topic:  # 喜欢X，不喜欢Y about the same thing: one preference, X over Y
            first_span, first = by_topic[topic]
            liked = first.get("prefers") or value.get("prefers")
            disliked = first.get("dislikes") or value.get("dislikes")
            merged = {"prefers": liked, "over": disliked} if liked and disliked else first
            by_topic[topic] = ((min(first_span[0], span[0]), max(first_span[1], span[1])), merged)
        else:
            by_topic[topic] = (span, value)
    for topic, (span, value) in by_topic.items():
        if not aliases.programs_in(str(value.get("prefers") or "")):  # 倾向于专才 is a target program
            yield Finding("preference", f"preference_{topic}", value, span, guards=guards)


RULES: tuple[Rule, ...] = (
    family,
    name,
    tools,
    immigration,
    intents,
    preferences,
    language_scores,
    wechat,
)
