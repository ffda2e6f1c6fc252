"""Lists the user writes about themselves, read part by part as virtual self-statements.

- "I'm Emily, 31, a pharmacist": after a self-introduction, each comma part reads as "I'm <part>".
- A colon-led list, "Quick background: 38, married, two kids, based in Denver" / "我的情况：37岁，已婚":
  each part reads as "I'm <part>" and "I have <part>" (我<part> / 我有<part> in Chinese), unless the label
  is about someone else ("My wife: 35, nurse").
- A labelled line, "Location: Austin" / "学历：硕士": the label names the field, the value is read in a
  sentence frame for it ("I live in Austin", "学历是硕士").

parts() returns (statement, virtual sentence) pairs: the statement is the user's own words for the part.
"""

from __future__ import annotations

import re

from strataflow.llm.offline.text import OTHERS_EN, OTHERS_ZH, is_chinese

# "I'm <a name, an age or a title>," opens a list of facts about the speaker ("I'm off, Bo" does not).
SELF_INTRO = re.compile(
    r"^\W*(?:(?:hi|hello|hey)\W+)?(?P<lead>I'm|I am)\s+(?:[A-Z][a-z]+|\d{1,3}|an?\s+[\w -]+|married|"
    r"single)\s*,"
)
COLON_LIST = re.compile(r"^\W*(?P<label>[^:：\d]{1,30}?)\s*[:：]\s*(?P<body>.+)$")
PART_SPLIT = re.compile(r"\s*(?:[,，、;；]|\band\b|\bplus\b)\s*")
# Labels of single-value lines -> sentence frames ({v} is the value).
LABELS_EN: tuple[tuple[str, str], ...] = (
    (r"age", "I'm {v}"),
    (r"location|city|based in|home base|lives? in", "I live in {v}"),
    (r"education|degree|highest degree", "I have a {v}"),
    (r"school|university|college|alma mater", "I graduated from {v}"),
    (r"major|field of study|studied", "I majored in {v}"),
    (r"title|role|job|position|occupation", "I work as {v}"),
    (r"company|employer|works? at", "I work at {v}"),
    (r"salary|income|annual income|comp", "my salary is {v} a year"),
    (r"monthly income|monthly salary", "my salary is {v} a month"),
    (r"budget", "my budget is {v}"),
    (r"marital status|status", "I'm {v}"),
    (r"kids|children", "I have {v} kids"),
    (r"stack|tools|tech stack|tech", "I use {v}"),
    (r"experience|years of experience", "I have {v} years of experience"),
)
LABELS_ZH: tuple[tuple[str, str], ...] = (
    (r"年龄|年纪", "我今年{v}"),
    (r"城市|所在地|所在城市|坐标|现居|居住地|常住", "我住在{v}"),
    (r"学历|最高学历", "学历是{v}"),
    (r"学校|毕业院校|院校|母校", "我毕业于{v}"),
    (r"专业", "专业是{v}"),
    (r"职位|岗位|职业|工作|职务", "我是{v}"),
    (r"公司|单位|雇主", "我在{v}工作"),
    (r"年薪|年收入|收入", "年薪{v}"),
    (r"月薪|月收入", "月薪{v}"),
    (r"预算", "预算{v}"),
    (r"婚姻|婚姻状况|婚否", "{v}"),
    (r"子女|孩子|小孩", "有{v}孩子"),
    (r"技术栈|工具", "我用{v}"),
    (r"工作年限|工龄|经验", "工作{v}"),
)


def _about_someone_else(label: str) -> bool:
    return bool(OTHERS_ZH.search(label) or OTHERS_EN.search(label))


def _labelled(label: str, value: str, chinese: bool) -> str | None:
    for pattern, frame in LABELS_ZH if chinese else LABELS_EN:
        if re.fullmatch(pattern, label.strip(), re.IGNORECASE):
            if chinese and frame == "有{v}孩子" and not re.search(r"[个名位]$", value):
                frame = "有{v}个孩子"
            if not chinese and frame.endswith("years of experience"):
                value = re.sub(r"\s*(?:years?|yrs?)$", "", value, flags=re.IGNORECASE)
            return frame.format(v=value.strip())
    return None


def parts(sentence: str) -> list[tuple[str, str]]:
    """(statement, virtual sentence) pairs of a self-introduction, a colon-led list or a labelled line."""
    chinese = is_chinese(sentence)
    lead = None if chinese else SELF_INTRO.match(sentence)
    if lead and "," in sentence:
        found: list[tuple[str, str]] = []
        for match in re.finditer(r",\s*(?P<part>[^,;]+)", sentence):
            part = match.group("part")
            if re.match(r"(?:and\s+)?(?:I|we|my|but|so|because)\b", part, re.IGNORECASE):
                break
            found.append((sentence[: match.end("part")].strip(" .!,"), "I'm " + re.sub(r"^and\s+", "", part)))
        return found
    colon = COLON_LIST.match(sentence)
    if not colon or _about_someone_else(colon.group("label")):
        return []
    label, body = colon.group("label"), colon.group("body").strip(" .。!！")
    pieces = [p.strip(" .。") for p in PART_SPLIT.split(body) if p.strip(" .。")]
    if len(pieces) == 1:
        framed = _labelled(label, body, chinese)
        return [(sentence.strip(" .。"), framed)] if framed else []
    frames = ("我{p}", "我有{p}") if chinese else ("I'm {p}", "I have {p}")
    return [(piece, frame.format(p=piece)) for piece in pieces for frame in frames]
