"""How and when the user wants to be contacted and answered, in Chinese and English: length ("keep it
short", "简短一点"), format ("bullet points please", "用表格"), channel ("text me rather than calling",
"发微信就好") and timing or quiet hours ("only email after 6pm", "别周末打电话").

Keys and values (preferences, said as requests, so a polite question "could you keep it short?" counts):
- preference_response_length {"prefers": "short" | "detailed"} (Chinese: 简短 / 详细)
- preference_format {"prefers": "bullet points"} or {"avoid": "tables"}
- preference_contact_method {"prefers": "email", "over": "phone"?, "when": "after 6pm"?} or {"avoid": "phone"}
- preference_contact_time {"when": "on weekends", "avoid" | "prefers" | "only": what, e.g. "calls"}
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

from strataflow.llm.offline.text import Finding

Rule = Callable[[str], Iterator[Finding]]
IGNORE = re.IGNORECASE
GUARDS = frozenset({"others"})

CHANNEL_EN = (
    r"e-?mails?|emailing|phone calls?|phone|calls?|calling|texts?|texting|text messages?|sms|whatsapp|"
    r"wechat|slack|teams|zoom|video calls?|telegram|signal|messages?|messaging|dms?|voicemails?|in person|"
    r"linkedin|meetings?"
)
TIME_EN = (
    r"(?:(?:on|at|in the|during|over the)\s+)?"
    r"(?:weekends?|weekdays?|(?:mon|tues|wednes|thurs|fri|satur|sun)days?|"
    r"mornings?|afternoons?|evenings?|nights?|lunch(?:time)?|work(?:ing)? hours|office hours|business hours|"
    r"after work|the weekend)"
    r"|(?:before|after|past|until|till|between)\s+\d{1,2}(?::\d\d)?\s*(?:am|pm|a\.m\.|p\.m\.|h)?"
    r"(?:\s*(?:and|-|–|to)\s*\d{1,2}(?::\d\d)?\s*(?:am|pm)?)?"
    r"|\d{1,2}(?::\d\d)?\s*(?:am|pm)\s*(?:-|–|to)\s*\d{1,2}(?::\d\d)?\s*(?:am|pm)"
)
VERB_CHANNEL = {
    "text": "text",
    "email": "email",
    "e-mail": "email",
    "call": "phone",
    "ring": "phone",
    "phone": "phone",
    "message": "message",
    "ping": "message",
    "whatsapp": "WhatsApp",
    "dm": "DM",
    "slack": "Slack",
}
FORMAT_EN = (
    r"bullet(?:ed)?[- ]points?|bullets|bullet(?:ed)? lists?|numbered lists?|checklists?|tables?|markdown|"
    r"plain text|one paragraph|short paragraphs|step[- ]by[- ]step|headings|code blocks?|pdfs?|spreadsheets?|"
    r"slides|diagrams?|charts?|a list|lists"
)
FORMAT_CUE_EN = (
    r"\b(?:use|using|prefer|like|love|want|give me|send me|please|format|summari[sz]e|write|answer|reply|"
    r"respond|list|show|present|lay (?:it|them) out|put (?:it|them|things)|as|in|rather than|instead of|"
    r"over)\b"
)


def _finding(key: str, value: dict[str, Any], span: tuple[int, int]) -> Finding:
    return Finding("preference", key, value, span, guards=GUARDS)


def length_en(sentence: str) -> Iterator[Finding]:
    short = (
        r"\b(?:keep|make)\s+(?:it|them|things|(?:your\s+|the\s+)?(?:answers?|replies|responses?|messages?|"
        r"emails?|updates?|summar(?:y|ies)))\s+(?:short|brief|concise|simple|succinct|to the point|tight)|"
        r"\b(?:short|brief|concise|shorter|succinct)\s+(?:answers?|replies|responses?|messages?|emails?|"
        r"summar(?:y|ies)|updates?|version)|\btl;?dr\b|\bbe\s+(?:brief|concise|succinct)\b|"
        r"\b(?:no|not)\s+(?:long|lengthy|wordy)\b|\b(?:one|two)[- ]liners?\b"
    )
    detailed = (
        r"\b(?:detailed|longer|in-depth|thorough|full)\s+(?:answers?|explanations?|replies|responses?|"
        r"breakdowns?)|\bin (?:more |full |great )?detail\b|\bbe (?:thorough|detailed)\b"
    )
    for pattern, value in ((short, "short"), (detailed, "detailed")):
        match = re.search(pattern, sentence, IGNORE)
        if match:
            yield _finding("preference_response_length", {"prefers": value}, match.span())
            return


def format_en(sentence: str) -> Iterator[Finding]:
    negative = re.search(
        rf"\b(?:no|without|avoid|don't use|do not use|skip(?: the)?|hate|dislike|not in)\s+"
        rf"(?P<f>{FORMAT_EN})\b",
        sentence,
        IGNORE,
    )
    if negative:
        yield _finding("preference_format", {"avoid": _format(negative.group("f"))}, negative.span())
        return
    for match in re.finditer(rf"\b(?P<f>{FORMAT_EN})\b", sentence, IGNORE):
        if re.search(FORMAT_CUE_EN, sentence, IGNORE) and not re.match(
            r"^\W*(?:the|this|that|your)\s", sentence[: match.start()] + " ", IGNORE
        ):
            yield _finding("preference_format", {"prefers": _format(match.group("f"))}, match.span())
            return


def _format(text: str) -> str:
    word = re.sub(r"\s+", " ", text.lower().replace("-", " "))
    return "bullet points" if word.startswith("bullet") else word.removeprefix("a ")


def channel_en(sentence: str) -> Iterator[Finding]:
    verbs = "|".join(VERB_CHANNEL)
    avoid = re.search(
        rf"\b(?:don't|do not|never|please don't|no need to)\s+(?P<v>{verbs})\s+me\b", sentence, IGNORE
    )
    if avoid and not re.search(TIME_EN, sentence[avoid.end() :], IGNORE):
        channel = VERB_CHANNEL[avoid.group("v").lower()]
        yield _finding("preference_contact_method", {"avoid": channel}, avoid.span())
        return
    patterns = (
        rf"\b(?:only\s+|just\s+|please\s+)*(?P<v>{verbs})\s+me(?!\s+(?:the|a|an|it|that|this|back)\b|\s+(?-i:[A-Z]))"
        rf"(?:\s+(?:on|via|through)\s+(?P<via>{CHANNEL_EN}))?",
        rf"\b(?:reach|contact|get in touch with|get hold of)\s+me\s+(?:on|via|by|through|at|over)\s+"
        rf"(?P<c>{CHANNEL_EN})",
        rf"\b(?P<c2>{CHANNEL_EN})\s+(?:is|are|works?)\s+(?:best|better|easiest|preferred|fine|great)\b",
        rf"\bonly\s+(?P<c3>{CHANNEL_EN})\b",
    )
    for pattern in patterns:
        match = re.search(pattern, sentence, IGNORE)
        if not match:
            continue
        found = match.groupdict()
        named: str | None = found.get("via") or found.get("c") or found.get("c2") or found.get("c3")
        channel = named.lower() if named else VERB_CHANNEL[(found.get("v") or "message").lower()]
        value: dict[str, Any] = {"prefers": channel}
        over = re.search(
            r"\b(?:rather than|instead of|not|over)\s+(?P<o>\w+)", sentence[match.end() :], IGNORE
        )
        if over:
            value["over"] = over.group("o")
        when = re.search(TIME_EN, sentence[match.end() :], IGNORE)
        if when:
            value["when"] = when.group(0).strip()
        yield _finding("preference_contact_method", value, match.span())
        return


def timing_en(sentence: str) -> Iterator[Finding]:
    what = (
        r"(?P<c>call(?:ing|s)?|text(?:ing|s)?|messag(?:e|es|ing)|e-?mails?|emailing|ping(?:ing|s)?|"
        rf"contact(?:ing)?|ring(?:ing)?|phone calls?|meetings?|{CHANNEL_EN})"
    )
    rules = (
        (
            "avoid",
            rf"\b(?:no|don't|do not|never|please don't|avoid|not)\s+{what}(?:\s+me)?\s+(?P<t>{TIME_EN})",
        ),
        (
            "avoid",
            rf"\bquiet hours?\s*(?:are|is|:)?\s*"
            rf"(?P<t>{TIME_EN}|\d{{1,2}}\s*(?:am|pm)?\s*(?:-|–|to)\s*\d{{1,2}}\s*(?:am|pm)?)",
        ),
        ("only", rf"\bonly\s+{what}\s+(?P<t>{TIME_EN})"),
        (
            "prefers",
            rf"\b(?P<t>{TIME_EN})\s+(?:is|are|works?)\s+(?:best|better|ideal|good|fine)(?:\s+for\s+{what})?",
        ),
        (
            "prefers",
            rf"\b(?:best|easiest)\s+(?:time\s+)?to\s+(?:reach|call|contact|get|catch)\s+me\s+is\s+(?P<t>{TIME_EN})",
        ),
        ("prefers", rf"\b(?:call|text|email|message|reach|contact|ping)\s+me\s+(?P<t>{TIME_EN})"),
        ("prefers", rf"\bI'?m\s+(?:usually\s+)?(?:free|available|reachable)\s+(?P<t>{TIME_EN})"),
    )
    for verb, pattern in rules:
        match = re.search(pattern, sentence, IGNORE)
        if match:
            said = (match.groupdict().get("c") or "contact").lower()
            value = {"when": match.group("t").strip(), verb: said}
            yield _finding("preference_contact_time", value, match.span())
            return


CHANNEL_ZH = (
    r"打电话|电话|来电|发微信|微信|企业微信|短信|发邮件|邮件|邮箱|语音|视频|发消息|消息|信息|"
    r"WhatsApp|钉钉|飞书|QQ|面谈|见面"
)
ACT_ZH = r"打电话|打给我|联系|发消息|发微信|发信息|发邮件|打扰|找我|约我?|开会|语音|视频|电话|微信|消息"
NUM_ZH = r"[0-9一二三四五六七八九十两]+点(?:半)?"
TIME_ZH = (
    rf"(?:(?:周末|工作日|周[一二三四五六日天]|星期[一二三四五六日天]|节假日|早上|上午|中午|下午|晚上|夜里|半夜|凌晨|白天|"
    rf"下班后|上班时间|午休)+(?:{NUM_ZH})?|{NUM_ZH})(?:以后|之后|以前|之前|后|前|到{NUM_ZH})?"
)


def length_zh(sentence: str) -> Iterator[Finding]:
    cue = r"(回复|回答|说|讲|写|消息|内容|尽量|请|麻烦|最好|希望|喜欢|习惯|一点|一些|就行|就好|别|不要|不用)"
    match = re.search(
        r"(?:别|不要|不用)(?:太)?(?:长|啰嗦|长篇大论|写太多)|简短|简洁|简单点|简明|短一点|短点|精简|言简意赅|"
        r"长话短说|说重点|直接说结论|(?P<long>详细|具体一点|详尽|展开说|多讲讲)",
        sentence,
    )
    if match and re.search(cue, sentence):
        yield _finding(
            "preference_response_length", {"prefers": "详细" if match.group("long") else "简短"}, match.span()
        )


def format_zh(sentence: str) -> Iterator[Finding]:
    fmt = r"列表|清单|要点|分点|表格|条目|markdown|Markdown|纯文字|纯文本|图表|大纲|思维导图|PPT|Excel|PDF"
    match = re.search(
        rf"(?P<neg>别|不要|不用)?(?:用|以|按|给我|做成|列成|列个|列出|整理成|写成|分)?(?P<f>{fmt})", sentence
    )
    cue = r"(用|以|按|给我|做成|列|整理成|写成|形式|格式|就行|就好|最好|喜欢|习惯|方式|发我|吧)"
    if match and re.search(cue, sentence):
        verb = "avoid" if match.group("neg") else "prefers"
        yield _finding("preference_format", {verb: match.group("f")}, match.span())


def contact_zh(sentence: str) -> Iterator[Finding]:
    neg = r"(?:别|不要|勿|请勿|请不要|尽量别|千万别|不方便|不接)"
    for pattern in (
        rf"{neg}(?:在)?(?P<t>{TIME_ZH})(?:给我|找我)?(?P<c>{ACT_ZH})",
        rf"(?P<t>{TIME_ZH})(?:的话)?(?:请)?{neg}(?:给我)?(?P<c>{ACT_ZH})",
    ):
        match = re.search(pattern, sentence)
        if match:
            value = {"when": match.group("t"), "avoid": match.group("c")}
            yield _finding("preference_contact_time", value, match.span())
            return
    match = re.search(
        rf"(?P<t>{TIME_ZH})(?:比较|最|都|一般)?(?:(?P<c>{ACT_ZH})(?:就好|就行|比较好|最好|方便)|方便|有空|合适)",
        sentence,
    )
    if match:
        value = {"when": match.group("t"), "prefers": match.group("c") or "联系"}
        yield _finding("preference_contact_time", value, match.span())
    match = re.search(
        rf"(?P<neg>{neg})?(?:用|通过|发|打)?(?P<c>{CHANNEL_ZH})(?:联系我?|沟通|找我|通知我?|给我)?"
        r"(?P<ok>就好|就行|就可以|比较好|最好|比较方便|方便|联系|沟通)?",
        sentence,
    )
    if match and (match.group("ok") or match.group("neg")):
        channel = re.sub(r"^(打|发)", "", match.group("c"))
        value = {"avoid": channel} if match.group("neg") else {"prefers": channel}
        yield _finding("preference_contact_method", value, match.span())


ZH_RULES: tuple[Rule, ...] = (length_zh, format_zh, contact_zh)
EN_RULES: tuple[Rule, ...] = (length_en, format_en, channel_en, timing_en)
