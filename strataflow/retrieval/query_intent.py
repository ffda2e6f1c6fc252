"""Rules that read a user's query for the context builder: its intent (recap, fact, other) and the L2 keys or
kinds its words point at. Chinese and English; general phrasings, not sample sentences (the cases are listed
in tests/retrieval/test_context.py).
"""

from __future__ import annotations

import re
from typing import Literal

Intent = Literal["recap", "fact", "other"]

# Recap wins over fact ("what did I work on last week" is a recap). Patterns are general phrasings, not
# sample sentences; tests/retrieval/test_context.py lists the cases.
RECAP_PATTERNS = re.compile(
    r"\bwhat\s+(has\s+|have\s+)?(happened|went on|been going on)\b"
    r"|\bwhat\s+(did|have)\s+(we|i|you|they|he|she)\s+(do|done|discuss|discussed|talk|talked|work|worked|decide)"
    r"|\brecap\b|\bsummar(y|ise|ize)\b|\bcatch\s+(me\s+)?up\b|\boverview\b|\bprogress\b|\bso\s+far\b"
    r"|\b(last|this|past|previous)\s+(week|month|few\s+days|days)\b|\blately\b|\brecently\b|\bweekly\b"
    r"|\bstatus\s+update\b|\bany\s+updates?\b"
    r"|总结|回顾|复盘|上周|本周|这周|上个?星期|这个?星期|上个?月|最近|近期|近来|这几天|进展|进度|发生了什么|发生过什么"
    r"|做了什么|做了哪些|聊了什么|聊过什么|谈了什么|讨论了什么|说了什么|概况|汇总|周报|近况|动态",
    re.IGNORECASE,
)
FACT_PATTERNS = re.compile(
    r"\b(what|who|where|when|which|how\s+old|how\s+many|how\s+much|how\s+long)\b"
    r"|\b(my|mine|his|her|their)\s+\w+|\babout\s+me\b|\bprofile\b|\bremember\b|\bdo(es)?\s+(i|he|she|they)\b"
    r"|\b(prefer|preference|favou?rite|like|likes)\b|\bam\s+i\b"
    r"|我的|我叫|我是谁|多大|几岁|年龄|学历|学校|大学|专业|工作|公司|职位|收入|年薪|住在|哪里|哪儿|哪个|婚|孩子"
    r"|偏好|喜欢|资料|档案|记得|是什么|是谁|多少|电话|邮箱|哪家|什么时候",
    re.IGNORECASE,
)

# Question words that point at L2 keys (the closed profile vocabulary of models/vocabulary.py) or kinds, so
# "我在哪家公司工作" finds the company item although no word of the statement is in the question.
KEY_HINTS: tuple[tuple[re.Pattern[str], tuple[str, ...], tuple[str, ...]], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), keys, kinds)
    for pattern, keys, kinds in (
        (
            r"公司|单位|工作|上班|职位|职业|岗位|\b(employer|company|work|works|job|occupation|title|role)\b",
            ("company", "job_title", "industry"),
            (),
        ),
        (
            r"大学|学校|毕业|读书|\b(university|college|school|graduated?)\b",
            ("university", "education", "major"),
            (),
        ),
        (r"学历|学位|\b(education|degree)\b", ("education", "university"), ()),
        (r"专业|\b(major|studied|study)\b", ("major",), ()),
        (r"几岁|多大|年龄|年纪|\bage\b|how old|\bborn\b", ("age",), ()),
        (
            r"住在|哪里人|城市|\b(location|live|lives|living|city|based)\b",
            ("location", "hometown", "target_city"),
            (),
        ),
        (r"名字|叫什么|\b(name|called)\b", ("name",), ()),
        (r"电话|手机|邮箱|联系|\b(phone|email|e-mail|contact)\b", ("phone", "email"), ()),
        (r"收入|年薪|工资|薪水|\b(income|salary|earns?)\b", ("annual_income",), ()),
        (r"经验|\bexperience\b", ("years_of_experience",), ()),
        (
            r"结婚|婚姻|已婚|未婚|配偶|老公|老婆|丈夫|妻子|\b(married|marital|spouse|wife|husband|partner)\b",
            ("marital_status", "spouse"),
            (),
        ),
        (
            r"孩子|小孩|儿子|女儿|\b(children|kids?|child|sons?|daughters?)\b",
            ("children", "family_members"),
            (),
        ),
        (
            r"移民|签证|申请|\b(visa|immigration|immigrate|programs?|apply|application)\b",
            ("target_programs", "timeline", "current_visa", "target_city"),
            (),
        ),
        (r"预算|\bbudget\b", ("budget",), ()),
        (r"语言|英语|雅思|托福|\b(languages?|english|ielts|toefl)\b", ("languages", "language_scores"), ()),
        (r"技能|工具|技术|\b(skills?|tools?|stack|technolog(y|ies))\b", ("skills", "tools"), ()),
        (r"决定|决策|\b(decide|decided|decision|decisions)\b", (), ("decision",)),
        (r"进度|状态|进展|\b(status|progress)\b", (), ("status",)),
        (
            r"喜欢|偏好|习惯|\b(prefer|prefers|preference|preferences|like|likes|favou?rite)\b",
            (),
            ("preference",),
        ),
        (r"反馈|意见|\b(feedback|complain|complaint)\b", (), ("feedback",)),
        (
            r"打算|想要|计划|目标|\b(plan|plans|planning|intend|intends|goal|goals|want|wants)\b",
            (),
            ("intent",),
        ),
    )
)


def classify_intent(query: str) -> Intent:
    """recap for 'what happened' questions, fact for questions about a person's facts, else other."""
    if RECAP_PATTERNS.search(query):
        return "recap"
    if FACT_PATTERNS.search(query):
        return "fact"
    return "other"


def key_hints(query: str) -> tuple[list[str], list[str]]:
    """(keys, kinds) the query's words point at (KEY_HINTS)."""
    keys: dict[str, None] = {}
    kinds: dict[str, None] = {}
    for pattern, hinted_keys, hinted_kinds in KEY_HINTS:
        if pattern.search(query):
            keys.update(dict.fromkeys(hinted_keys))
            kinds.update(dict.fromkeys(hinted_kinds))
    return list(keys), list(kinds)
