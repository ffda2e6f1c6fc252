"""The assistant's turn as context: a bare answer to its question is read as the user's statement.

"How old are you?" - "41" becomes "I'm 41 years old"; "您在哪个城市？" - "深圳" becomes "我住在深圳". Only
open questions about one profile field count, and only short answers that are a value (not "yes", not a
sentence of their own, which the rules read directly). Nothing the assistant says is ever a fact: "So you
are 35?" asks nothing open, and a "yes" to it is not a stated value.
"""

from __future__ import annotations

import re

from strataflow.llm.offline.text import is_chinese

# (field, question pattern, Chinese frame, English frame); {a} is the user's answer.
QUESTIONS: tuple[tuple[str, str, str, str], ...] = (
    ("age", r"多大|几岁|年龄|年纪|how old|your age|what age", "我今年{a}岁", "I'm {a} years old"),
    (
        "location",
        r"在哪个城市|哪个城市|住在哪|住哪|在哪里生活|坐标|现居|"
        r"where (?:do|are) you (?:live|living|based|located)|which city",
        "我住在{a}",
        "I live in {a}",
    ),
    (
        "university",
        r"哪个学校|哪所(?:大学|学校)|毕业院校|哪里毕业|哪毕业|which (?:university|school|college)|"
        r"where did you (?:study|graduate|go to school)",
        "我毕业于{a}",
        "I graduated from {a}",
    ),
    (
        "major",
        r"什么专业|专业是|学的什么|what did you (?:study|major in)|your major",
        "专业是{a}",
        "I majored in {a}",
    ),
    (
        "education",
        r"学历|什么学位|highest degree|your degree|level of education",
        "学历是{a}",
        "I have a {a}",
    ),
    (
        "company",
        r"哪家公司|什么公司|在哪(?:里)?(?:工作|上班)|which company|who do you work for|where do you work",
        "我在{a}工作",
        "I work at {a}",
    ),
    (
        "job_title",
        r"做什么(?:工作)?|什么工作|职业|职位|什么岗位|what do you do|your (?:job|role|title|occupation)",
        "我是{a}",
        "I work as {a}",
    ),
    (
        "years_of_experience",
        r"工作(?:了)?几年|工作多久|几年经验|多少年(?:的)?经验|how many years|how long have you been",
        "我工作{a}年",
        "I have {a} years of experience",
    ),
    (
        "monthly_income",
        r"月薪|每个?月(?:收入|工资)|monthly (?:salary|income)",
        "月薪{a}",
        "my salary is {a} a month",
    ),
    (
        "annual_income",
        r"年薪|收入|工资|薪资|salary|income|how much do you (?:make|earn)",
        "年薪{a}",
        "my salary is {a} a year",
    ),
    ("budget", r"预算|budget", "预算{a}", "my budget is {a}"),
    ("children", r"几个孩子|几个小孩|how many (?:kids|children)", "我有{a}个孩子", "I have {a} kids"),
    ("name", r"怎么称呼|叫什么名字|贵姓|your name|what should I call you", "我叫{a}", "my name is {a}"),
)
NOT_VALUES = re.compile(
    r"^(?:yes|yeah|yep|no|nope|sure|ok|okay|right|correct|maybe|not sure|"
    r"是的?|对|嗯|好的?|没错|不是|不对|可能|不知道)\W*$",
    re.IGNORECASE,
)


def answer_as_statement(question: str, answer: str) -> str:
    """The user's short answer to the assistant's open question, framed as their own statement ("" when the
    question asks about no profile field or the answer is not a bare value)."""
    value = answer.strip().strip("。.!！~～ ")
    value = re.sub(r"(?:吧|啊|呀|呢|哈|了)+$", "", value)
    if not question or not value or NOT_VALUES.match(value) or value.endswith(("?", "？")):
        return ""
    chinese = is_chinese(value) or (is_chinese(question) and not re.search(r"[A-Za-z]{3,}", value))
    if (chinese and len(value) > 16) or (not chinese and len(value.split()) > 6):
        return ""  # a sentence of its own: the rules read it directly
    for _, pattern, frame_zh, frame_en in QUESTIONS:
        if re.search(pattern, question, re.IGNORECASE):
            if chinese:
                value = re.sub(r"岁$", "", value) if "岁" in frame_zh else value
                value = re.sub(r"年$", "", value) if frame_zh.endswith("年") else value
                value = re.sub(r"个?(?:孩子|小孩)$", "", value) if "孩子" in frame_zh else value
                return frame_zh.format(a=value)
            value = re.sub(r"\s*(?:years?(?:\s+old)?|yrs?)$", "", value, flags=re.IGNORECASE)
            value = re.sub(r"\s*(?:kids|children)$", "", value, flags=re.IGNORECASE)
            return frame_en.format(a=value)
    return ""
