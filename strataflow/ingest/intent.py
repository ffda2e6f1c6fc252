"""Rule-based message intent at ingest (Chinese and English); cheap, deterministic, no LLM.

The first rule that matches wins, in this order:

1. greeting       a short message (<= 40 chars) that is only a salutation or small talk:
                  "hi", "hello team", "good morning", "thanks, bye"; 你好, 您好, 早上好, 哈喽, 再见.
2. request        asks someone to do something: "please ...", "could/can/would you ...", "I need you to",
                  "let me know", "send me"; 请 (not 申请/邀请/请问), 帮我, 麻烦, 能不能帮, 希望您.
3. question       ends with ? or ？, or opens with a question word (what, how, why, when, where, who,
                  which, is/are/do/does/can/should ...); 吗/呢 at the end, 什么, 怎么, 为什么, 哪, 多少,
                  是否, 能否, 可不可以, 有没有, 请问.
4. decision       "we decided", "decided to", "let's go with", "we'll go with", "agreed to", "the decision",
                  "going forward we"; 决定, 定了, 确定用, 就选, 最终选.
5. status_update  progress and state: "done", "finished", "completed", "in progress", "NN%", "shipped",
                  "deployed", "merged", "blocked", "on track", "behind schedule"; 完成, 进度, 进展, 上线,
                  搞定, 正在, 卡住.
6. feedback       an evaluation: "great job", "thanks", "looks good", "lgtm", "love", "hate",
                  "too slow", "confusing", "not happy"; 谢谢, 不错, 满意, 不满意, 太慢, 很好, 失望.
7. statement      any other message with at least two letters or one CJK character.
8. other          the rest (emoji, punctuation, numbers only).

An LLM stage may refine intents later; this is the default that runs at ingest.
"""

from __future__ import annotations

import re

from models.common import Intent
from strataflow.textsearch import CJK

_WORDS = re.compile(r"[a-z]+(?:'[a-z]+)?")
# Bytes of a UTF-8 text to keep for word splitting (a-z and the apostrophe); every other byte, those of
# non-ASCII characters included, becomes a space. See _words.
_WORD_BYTES = bytes(c if 97 <= c <= 122 or c == 39 else 32 for c in range(256))
_PERCENT = re.compile(r"\d ?%")
_WORDY = re.compile(rf"[A-Za-z].*[A-Za-z]|[{CJK}]")

GREETING_WORDS = {
    "hi",
    "hello",
    "hey",
    "hiya",
    "yo",
    "good",
    "morning",
    "afternoon",
    "evening",
    "night",
    "thanks",
    "thank",
    "you",
    "thx",
    "bye",
    "goodbye",
    "see",
    "cheers",
    "welcome",
    "all",
    "team",
    "everyone",
    "guys",
    "folks",
    "there",
    "again",
    "so",
    "much",
    "how",
    "are",
    "nice",
    "to",
    "meet",
    "it's",
    "going",
    "later",
}
GREETING_OPENERS = {
    "hi",
    "hello",
    "hey",
    "hiya",
    "yo",
    "good",
    "morning",
    "thanks",
    "thank",
    "thx",
    "bye",
    "goodbye",
    "see",
    "cheers",
    "welcome",
    "nice",
}
ZH_GREETINGS = (
    "你好",
    "您好",
    "早上好",
    "早安",
    "上午好",
    "下午好",
    "晚上好",
    "晚安",
    "哈喽",
    "嗨",
    "在吗",
    "再见",
    "拜拜",
    "谢谢",
    "多谢",
)
REQUEST_OPENERS = {"please", "pls", "kindly"}
REQUEST_PHRASES = (
    "could you",
    "can you",
    "would you",
    "will you",
    "i need you to",
    "let me know",
    "send me",
    "remind me",
    "make sure to",
    "don't forget to",
    "please ",
)
ZH_REQUEST = (
    "帮我",
    "帮忙",
    "麻烦",
    "能不能帮",
    "可以帮",
    "希望您",
    "给我发",
    "给我看",
    "给我介绍",
    "给我推荐",
)
QUESTION_OPENERS = {
    "what",
    "how",
    "why",
    "when",
    "where",
    "who",
    "whom",
    "whose",
    "which",
    "is",
    "are",
    "am",
    "was",
    "were",
    "do",
    "does",
    "did",
    "can",
    "could",
    "should",
    "would",
    "will",
    "shall",
    "may",
    "have",
    "has",
    "any",
}
ZH_QUESTION = (
    "请问",
    "什么",
    "怎么",
    "为什么",
    "为何",
    "哪",
    "多少",
    "是否",
    "能否",
    "可不可以",
    "有没有",
    "是不是",
    "行不行",
    "几个",
    "几年",
    "几岁",
    "几月",
    "几天",
)
DECISION_PHRASES = (
    "decided",
    "we agreed",
    "i agreed",
    "team agreed",
    "we chose",
    "we picked",
    "settled on",
    "going with",
    "go with",
    "let's use",
    "we'll use",
    "we will use",
    "switch to",
    "stick with",
    "the decision",
    "final decision",
    "going forward we",
    "going forward, we",
)
ZH_DECISION = ("决定", "定了", "确定用", "确定选", "确定了", "就选", "就用", "最终选", "最终定", "拍板")
STATUS_WORDS = {
    "done",
    "finished",
    "completed",
    "complete",
    "shipped",
    "deployed",
    "released",
    "merged",
    "blocked",
    "wip",
    "status",
    "progress",
    "fixed",
    "resolved",
    "halfway",
    "eta",
}
STATUS_PHRASES = ("in progress", "on track", "behind schedule", "ahead of schedule", "started working")
ZH_STATUS = ("完成", "进度", "进展", "上线", "搞定", "正在", "卡住", "延期", "做完", "已经提交", "已经开始")
FEEDBACK_WORDS = {
    "thanks",
    "lgtm",
    "love",
    "hate",
    "dislike",
    "confusing",
    "frustrating",
    "frustrated",
    "annoying",
    "annoyed",
    "impressed",
    "disappointed",
    "helpful",
    "unhelpful",
    "useless",
    "great",
    "awesome",
    "excellent",
    "amazing",
}
FEEDBACK_PHRASES = (
    "thank you",
    "looks good",
    "good job",
    "nice work",
    "well done",
    "too slow",
    "too long",
    "not happy",
    "happy with",
    "great work",
    "good work",
)
ZH_FEEDBACK = ("谢谢", "感谢", "不错", "满意", "太慢", "很好", "太好了", "失望", "有帮助", "没用")


def _has(text: str, needles: tuple[str, ...]) -> bool:
    for needle in needles:
        if needle in text:
            return True
    return False


# A phrase list is scanned only when the message has one of its words (or, for Chinese lists, any non-ASCII).
REQUEST_HINTS = {"you", "me", "please", "sure", "forget"}
DECISION_HINTS = {
    "decided",
    "agreed",
    "chose",
    "picked",
    "settled",
    "going",
    "go",
    "use",
    "switch",
    "stick",
    "decision",
    "forward",
    "we'll",
    "let's",
}
STATUS_HINTS = {"progress", "track", "schedule", "working"}
FEEDBACK_HINTS = {"thank", "looks", "job", "work", "done", "slow", "long", "happy"}


def _words(lower: str) -> list[str]:
    """_WORDS.findall(lower), a third faster: a match never spans a byte other than a-z or the apostrophe,
    so splitting on those first and running the pattern only on the pieces with an apostrophe gives the
    same words (tests/ingest/test_intent.py compares the two)."""
    pieces = lower.encode("utf-8", "surrogatepass").translate(_WORD_BYTES).decode().split()
    if "'" not in lower:
        return pieces
    return [word for piece in pieces for word in (_WORDS.findall(piece) if "'" in piece else (piece,))]


def classify_intent(text: str) -> Intent:
    """The intent of one message by the rules in the module docstring."""
    lower = text.lower()
    words = _words(lower)
    wordset = set(words)
    first = words[0] if words else ""
    stripped = text.rstrip()
    chinese = not text.isascii()
    if len(text) <= 40:
        if words and first in GREETING_OPENERS and GREETING_WORDS.issuperset(words):
            return Intent.greeting
        if chinese and not words and text.lstrip().startswith(ZH_GREETINGS) and len(stripped) <= 12:
            return Intent.greeting
    if first in REQUEST_OPENERS or (not REQUEST_HINTS.isdisjoint(wordset) and _has(lower, REQUEST_PHRASES)):
        return Intent.request
    if chinese and (
        _has(text, ZH_REQUEST)
        or "请" in text.replace("申请", "").replace("邀请", "").replace("请假", "").replace("请问", "")
    ):
        return Intent.request
    if stripped.endswith(("?", "？")) or first in QUESTION_OPENERS:
        return Intent.question
    if chinese and (stripped.rstrip("。！!~ ").endswith(("吗", "呢", "嘛")) or _has(text, ZH_QUESTION)):
        return Intent.question
    if (
        not DECISION_HINTS.isdisjoint(wordset)
        and _has(lower, DECISION_PHRASES)
        or chinese
        and _has(text, ZH_DECISION)
    ):
        return Intent.decision
    if (
        not STATUS_WORDS.isdisjoint(wordset)
        or not STATUS_HINTS.isdisjoint(wordset)
        and _has(lower, STATUS_PHRASES)
    ):
        return Intent.status_update
    if chinese and _has(text, ZH_STATUS) or "%" in text and _PERCENT.search(text):
        return Intent.status_update
    if (
        not FEEDBACK_WORDS.isdisjoint(wordset)
        or not FEEDBACK_HINTS.isdisjoint(wordset)
        and _has(lower, FEEDBACK_PHRASES)
    ):
        return Intent.feedback
    if chinese and _has(text, ZH_FEEDBACK):
        return Intent.feedback
    if _WORDY.search(text):
        return Intent.statement
    return Intent.other
