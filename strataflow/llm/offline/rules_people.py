"""Team rules, continued: feedback with its sentiment, and people with their roles (see rules_team)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from strataflow.llm.offline.patterns_en import TITLE_NOUN
from strataflow.llm.offline.rules_team import IGNORE, TOPIC_TRIM_ZH, WORDS
from strataflow.llm.offline.rules_zh import PERSON_ADDRESS
from strataflow.llm.offline.text import Finding, cut, is_chinese, slug
from strataflow.textsearch import CJK

Rule = Callable[[str], Iterator[Finding]]

FEEDBACK_EN = {
    "great": "positive",
    "good": "positive",
    "awesome": "positive",
    "excellent": "positive",
    "helpful": "positive",
    "useful": "positive",
    "fast": "positive",
    "clean": "positive",
    "intuitive": "positive",
    "nice": "positive",
    "perfect": "positive",
    "amazing": "positive",
    "clear": "positive",
    "easy to use": "positive",
    "slow": "negative",
    "confusing": "negative",
    "buggy": "negative",
    "broken": "negative",
    "bad": "negative",
    "terrible": "negative",
    "awful": "negative",
    "clunky": "negative",
    "hard to use": "negative",
    "unusable": "negative",
    "laggy": "negative",
    "unclear": "negative",
    "useless": "negative",
    "too long": "negative",
    "too complicated": "negative",
    "annoying": "negative",
    "outdated": "negative",
    "out of date": "negative",
    "incomplete": "negative",
    "inaccurate": "negative",
    "wrong": "negative",
    "expensive": "negative",
    "overpriced": "negative",
    "frustrating": "negative",
    "disappointing": "negative",
    "unstable": "negative",
    "solid": "positive",
    "smooth": "positive",
    "reliable": "positive",
    "stable": "positive",
    "impressive": "positive",
    "detailed": "positive",
    "flaky": "negative",
    "unreliable": "negative",
}
FEEDBACK_ZH = {
    "好用": "positive",
    "方便": "positive",
    "清楚": "positive",
    "清晰": "positive",
    "简单": "positive",
    "棒": "positive",
    "专业": "positive",
    "有用": "positive",
    "实用": "positive",
    "靠谱": "positive",
    "满意": "positive",
    "快": "positive",
    "不错": "positive",
    "难用": "negative",
    "不方便": "negative",
    "慢": "negative",
    "卡": "negative",
    "乱": "negative",
    "复杂": "negative",
    "差": "negative",
    "烂": "negative",
    "贵": "negative",
    "没用": "negative",
    "不靠谱": "negative",
    "不满意": "negative",
    "不好用": "negative",
    "麻烦": "negative",
    "看不懂": "negative",
    "不清楚": "negative",
}
# Adjectives that judge an answer or a piece of work: only these make "it/this/that is ..." feedback.
ABOUT_ANSWERS = frozenset(
    "helpful useful clear unclear confusing wrong perfect inaccurate incomplete outdated".split()
)
NOT_TOPICS_ZH = frozenset(
    "我 你 他 她 我们 今天 天气 身体 心情 家里 工作 生活 时间 最近 上午 下午 晚上 早上 中午 周末 "
    "工作日 白天 平时 明天 后天 下周 这周".split()
)


def feedback(sentence: str) -> Iterator[Finding]:
    if is_chinese(sentence):
        adjectives = "|".join(sorted(FEEDBACK_ZH, key=len, reverse=True))
        pattern = (
            rf"(?P<t>[{CJK}A-Za-z0-9]{{1,12}}?)(?P<neg>不|没|不太|不是很|不怎么|没那么)?"
            rf"(?:我觉得|我感觉|觉得|感觉)?(?:真的|实在|太|很|非常|挺|特别|有点|有些|比较|超|好|都|也)*(?P<a>{adjectives})"
            r"(?=了|啊|呀|的|吧|！|!|。|，|,|\s*$)"  # an opinion ends there; 不方便接电话 is not feedback
        )
        for match in re.finditer(pattern, sentence):
            topic = (
                TOPIC_TRIM_ZH.sub("", re.sub(r"(我觉得|我感觉|觉得|感觉)$", "", match.group("t")))
                or "general"
            )
            sentiment = FEEDBACK_ZH[match.group("a")]
            if match.group("neg"):
                sentiment = "negative" if sentiment == "positive" else "positive"
            topic = re.sub(r"^(这个|那个|这|那|它)$", "general", topic)
            if topic in NOT_TOPICS_ZH:
                continue
            yield Finding(
                "feedback",
                f"feedback_{slug(topic, 2) if topic != 'general' else 'general'}",
                {"sentiment": sentiment, "about": topic},
                match.span(),
                guards=frozenset({"question", "others"}),
            )
            return
        for match in re.finditer(
            rf"(?P<t>[{CJK}A-Za-z0-9]{{2,12}}?)(?:有|出了|出现了)(?:个|很多|一些|好多)?(?:bug|问题|毛病|故障)",
            sentence,
            IGNORE,
        ):
            topic = TOPIC_TRIM_ZH.sub("", match.group("t"))
            if topic and topic not in NOT_TOPICS_ZH:
                yield Finding(
                    "feedback",
                    f"feedback_{slug(topic, 2)}",
                    {"sentiment": "negative", "about": topic},
                    match.span(),
                    guards=frozenset({"question", "others"}),
                )
                return
        return
    adjectives = "|".join(sorted((re.escape(a) for a in FEEDBACK_EN), key=len, reverse=True))
    pattern = (
        rf"\b(?P<t>(?:the|this|that|your|our)\s+{WORDS}|it|this|that)\s+(?:is|was|are|were|looks|"
        rf"feels|seems|works|worked|has been|'s)\s+(?:really\s+|very\s+|so\s+|pretty\s+|too\s+|super\s+|"
        rf"quite\s+|"
        rf"a bit\s+|kind of\s+|way too\s+|incredibly\s+)*(?P<a>{adjectives})\b"
    )
    for match in re.finditer(pattern, sentence, IGNORE):
        about = re.sub(r"^(?:the|this|that|your|our)\s+", "", match.group("t"), flags=IGNORE)
        topic = "general" if about.lower() in ("it", "this", "that") else slug(about, 3)
        if topic == "general" and match.group("a").lower() not in ABOUT_ANSWERS:
            continue  # "that looks great" in small talk is no feedback; "that was helpful" is
        yield Finding(
            "feedback",
            f"feedback_{topic}",
            {"sentiment": FEEDBACK_EN[match.group("a").lower()], "about": about},
            match.span(),
            guards=frozenset({"question", "others"}),
        )
        return
    for match in re.finditer(
        r"\bI\s+(?:really\s+)?(?P<v>love|like|hate|dislike|don't like|can't stand)\s+(?:the|this|"
        r"your|how)\s+(?P<t>[A-Za-z][\w -]{1,30}?)(?=[,.;!?]|$)",
        sentence,
        IGNORE,
    ):
        sentiment = "positive" if match.group("v").lower() in ("love", "like") else "negative"
        yield Finding(
            "feedback",
            f"feedback_{slug(match.group('t'), 3)}",
            {"sentiment": sentiment, "about": match.group("t")},
            match.span(),
            guards=frozenset({"question", "others"}),
        )
        return


ROLE_ZH = (
    r"(?:产品经理|项目经理|技术负责人|负责人|组长|经理|总监|主管|设计师|工程师|架构师|分析师|开发|前端|后端|测试|运维|"
    r"老板|CEO|CTO|PM|owner|leader|顾问|老师|律师|会计|客户|甲方|对接人)"
)
NAME_EN = r"(?P<n>[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)"
NOT_ROLE = r"(?!(?:is|was|are|and|said|in|at|from|to|with|of|for|on|by)\b)"
ROLE_EN = rf"(?P<role>(?:{NOT_ROLE}[A-Za-z]+\s+){{0,3}}?{NOT_ROLE}(?:[A-Za-z]+))"
NOT_ROLE_WORDS = frozenset(
    "name title job email phone number address role position salary age favorite goal plan "
    "question own team new best first parents kids children family".split()
)
ROLE_HEAD = re.compile(
    rf"(?:\b(?:{TITLE_NOUN})s?|\b(?:lead|head|owner|boss|mentor|teammate|colleague|contact|advisor|sponsor|"
    rf"stakeholder|reviewer|champion|liaison|pm|po|em|tl))$",
    re.IGNORECASE,
)
NOT_PEOPLE = frozenset(
    "I The This That It We He She They Our My Your There Here What Who Which Today Yesterday "
    "Tomorrow Everyone Nobody Someone Also And But So".split()
)


def _zh_person(token: str) -> bool:
    import jieba.posseg as posseg

    if re.fullmatch(rf"[小老][{CJK}]", token) or re.fullmatch(r"[A-Z][a-z]+", token):
        return True
    if PERSON_ADDRESS.fullmatch(token):  # 王总, 李经理: a surname and a title address a person
        return True
    return any(flag.startswith("nr") for _, flag in posseg.lcut(token))


OWN_VERBS_EN = (
    r"owns|leads|runs|manages|heads|handles|maintains|looks after|takes care of|is responsible for|"
    r"is in charge of|signs off on|approves|covers|drives|coordinates|oversees|does"
)
OWN_VERBS_ZH = r"负责|管|主管|对接|跟进|牵头|把关|审批|维护"
OBJECT_EN = (
    r"(?:our\s+|the\s+|all\s+(?:the\s+)?)?(?P<w>[A-Za-z][\w./&-]*(?:\s+[\w./&-]+){0,4}?)"
    r"(?=[,.;!?]|$|\s+(?:and|but|so|while)\b)"
)


def _people_zh(sentence: str) -> list[tuple[str, dict[str, str], tuple[int, int]]]:
    found: list[tuple[str, dict[str, str], tuple[int, int]]] = []

    def add(raw: str, info: dict[str, str], span: tuple[int, int], last: bool = True) -> None:
        tokens = cut(raw)
        name = (tokens[-1] if last else tokens[0]) if tokens else raw
        if len(name) >= 2 and _zh_person(name):
            found.append((name, info, span))

    for match in re.finditer(
        rf"(?P<n>[{CJK}]{{2,3}}|[A-Z][a-z]+)(?:是|担任|作为)(?:我们|我的|咱们)?的?"
        rf"(?:团队|项目|组|部门|公司)??的?(?P<role>{ROLE_ZH})",
        sentence,
    ):
        add(match.group("n"), {"role": match.group("role")}, match.span())
    for match in re.finditer(
        rf"(?:我们|我的|咱们)的?(?:团队|项目|组|部门)??的?(?P<role>(?:(?!的)[{CJK}A-Za-z]){{0,4}}?{ROLE_ZH})是"
        rf"(?P<n>[{CJK}]{{2,3}}|[A-Z][a-z]+)",
        sentence,
    ):
        add(match.group("n"), {"role": match.group("role")}, match.span(), last=False)
    by_pattern = (
        rf"(?P<w0>[{CJK}A-Za-z]{{2,6}}?)(?:这边|那边|方面|部分|这块)?由(?P<n>[{CJK}]{{2,3}}|[A-Z][a-z]+)负责"
    )
    for match in re.finditer(by_pattern, sentence):
        owned = TOPIC_TRIM_ZH.sub("", match.group("w0"))
        if _zh_person(match.group("n")):  # 产品这边由陈静负责
            found.append((match.group("n"), {"role": "负责" + owned, "owns": owned}, match.span()))
    # 我们组长老王负责接口 / 产品那边小陈负责需求文档 / 张伟负责后端: read back from the verb.
    for match in re.finditer(rf"(?P<v>{OWN_VERBS_ZH})(?P<w>[{CJK}A-Za-z]{{2,10}})", sentence):
        before = re.split(r"[，,。；;：:]", sentence[: match.start()])[-1]
        short = re.search(rf"(?:{PERSON_ADDRESS.pattern}|[老小][{CJK}]|[A-Z][a-z]+)$", before)
        tokens = cut(before)
        name = short.group(0) if short else (tokens[-1] if tokens else "")
        if len(name) < 2 or not _zh_person(name) or before.endswith(("由", "的")):
            continue
        rest = before[: -len(name)]
        role = re.search(rf"(?:{ROLE_ZH})$", rest)
        rest = rest[: role.start()] if role else rest
        info = {"role": role.group(0) if role else match.group(0), "owns": match.group("w")}
        team = re.search(rf"(?P<t>[{CJK}A-Za-z]{{2,4}}?)(?:那边|这边|组|部门|团队)的?$", rest)
        if team and not re.fullmatch(r"(?:我们|我的|咱们|我)", team.group("t")):
            info["team"] = team.group("t")
        found.append((name, info, (match.start() - len(before), match.end())))
    return found


def _people_en(sentence: str) -> list[tuple[str, dict[str, str], tuple[int, int]]]:
    found: list[tuple[str, dict[str, str], tuple[int, int]]] = []
    stop = r"(?=[,.;!?]|$|\s+(?:and|who|for|on|at|said|says|will|is|has|from)\b)"
    patterns = (
        rf"\b{NAME_EN}(?:\s+is\s+(?i:our|my|the)|\s+will be\s+(?i:our|my|the)|,\s+(?i:our|my))\s+"
        rf"{ROLE_EN}{stop}",
        rf"\b(?i:our|my)\s+(?:new\s+)?{ROLE_EN},?\s+{NAME_EN}(?=\s*[,.;!?]|\s+(?:said|says|will|is|has|"
        rf"thinks|wants|asked|suggested|and|{OWN_VERBS_EN})\b|$)",
        rf"\b(?i:our|my)\s+(?:new\s+)?{ROLE_EN}\s+is\s+{NAME_EN}\b",
    )
    for pattern in patterns:
        for match in re.finditer(pattern, sentence):
            name, role = match.group("n"), match.group("role").strip()
            if not ROLE_HEAD.search(role):  # "our friendship too, Caroline" names no role
                continue
            if name.split()[0] in NOT_PEOPLE or NOT_ROLE_WORDS & set(role.lower().split()):
                continue
            found.append((name, {"role": role}, match.span()))
    duty = (
        rf"\b{NAME_EN}(?:\s+(?:from|in|on)\s+(?:the\s+)?(?P<team>[a-z][\w&-]*(?:\s+[a-z][\w&-]*)?)|"
        rf",\s+(?i:our|my|the)\s+(?P<role>[^,]{{2,40}}),)?,?\s+(?P<v>{OWN_VERBS_EN})\s+{OBJECT_EN}"
    )
    for match in re.finditer(duty, sentence):
        if match.group("n").split()[0] in NOT_PEOPLE or re.search(
            r"\b(?:at|from|of|with|for|in)\s*$", sentence[: match.start()]
        ):
            continue  # "our client at Acme, owns ...": Acme is a company
        info = {"owns": match.group("w").strip()}
        if match.group("team"):
            info["team"] = re.sub(r"\s+team$", "", match.group("team"))
        if match.group("role"):
            info["role"] = match.group("role").strip()
        elif not match.group("team"):
            info["role"] = f"{match.group('v')} {match.group('w').strip()}"  # Priya leads our data team
        found.append((match.group("n"), info, match.span()))
    return found


def people(sentence: str) -> Iterator[Finding]:
    """person_<name> {"name", "role"?, "team"?, "owns"?}: a person of the user's work, with their role, their
    team ("Marco from legal") and what they own ("owns the vendor contracts", 负责接口)."""
    guards = frozenset({"question", "negation"})
    found = _people_zh(sentence) if is_chinese(sentence) else _people_en(sentence)
    merged: dict[str, tuple[dict[str, str], tuple[int, int]]] = {}
    for name, info, span in found:
        if name in merged:
            known, first = merged[name]
            merged[name] = ({**info, **known}, (min(first[0], span[0]), max(first[1], span[1])))
        else:
            merged[name] = (dict(info), span)
    for name, (info, span) in merged.items():
        yield Finding("fact", f"person_{slug(name, 3)}", {"name": name, **info}, span, guards=guards)


RULES: tuple[Rule, ...] = (feedback, people)
