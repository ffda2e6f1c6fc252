"""Team rules, Chinese and English: decisions with their reason, status with progress, feedback, people.

Keys: decision_<topic> {"decision", "reason"}, status_<topic> {"status", "progress"} (progress an int
percent or null), feedback_<topic> {"sentiment", "about"}, person_<name> {"name", "role"}. A topic is a
snake_case slug of what the statement is about (text.slug).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from strataflow.llm.offline import aliases
from strataflow.llm.offline.numbers import to_number
from strataflow.llm.offline.text import Finding, is_chinese, slug
from strataflow.textsearch import CJK

Rule = Callable[[str], Iterator[Finding]]
IGNORE = re.IGNORECASE
TEAM = frozenset({"question", "negation"})
REASON_ZH = r"(?:因为|由于|原因是|理由是|主要是因为|主要因为|考虑到|毕竟)(?P<r>[^。；！？;!?]+)"
REASON_EN = r"\b(?:because|since|as|due to|given that|so that|so we can|the reason being)\s+(?P<r>[^.;!?]+)"
VERB_LEAD_ZH = re.compile(
    r"^(要|用|采用|使用|改用|换成|换用|把|将|先|上|选|选用|迁移到|切换到|转向|统一用|继续用)+"
)
VERB_LEAD_EN = re.compile(
    r"^(?:to\s+)?(?:use|adopt|switch to|move to|migrate to|go with|stick with|keep|stay with|"
    r"build on|standardi[sz]e on|on|with|for)\s+",
    IGNORE,
)


def _topic(text: str) -> str:
    """What a decision or status is about: "for <X>" / "做X" names it; else its technology or first words."""
    if is_chinese(text):
        match = re.search(rf"(?:来|去)?(?:做|作为|当|用于)(?P<w>[{CJK}A-Za-z]{{2,8}})", text)
        if match:
            return slug(match.group("w"), 2)
        names = aliases.tech_in(text)
        return slug(names[0], 2) if names else slug(VERB_LEAD_ZH.sub("", text), 2)
    match = re.search(
        r"\bfor\s+(?:the\s+|our\s+|all\s+)?(?P<w>[A-Za-z][\w -]{1,30}?)(?:\s+(?:because|since|as)\b|$)",
        text,
        IGNORE,
    )
    if match:
        return slug(match.group("w"), 2)
    names = aliases.tech_in(text)
    return slug(names[0], 2) if names else slug(VERB_LEAD_EN.sub("", text), 3)


def _decision_text(text: str) -> str:
    """What was chosen: "use Postgres for the queue" -> "Postgres", "采用Kafka做消息队列" -> "Kafka"; other
    decisions ("postpone the launch", "用React重写前端") stay as said."""
    if is_chinese(text):
        match = re.search(rf"(?:来|去)?(?:做|作为|当|用于)[{CJK}A-Za-z]{{2,8}}$", text)
        return VERB_LEAD_ZH.sub("", text[: match.start()]).strip() if match and match.start() > 0 else text
    chosen = re.sub(r"\s+for\s+(?:the\s+|our\s+|all\s+)?[A-Za-z][\w -]{1,30}$", "", text, flags=IGNORE)
    return VERB_LEAD_EN.sub("", chosen).strip() or text


def decisions(sentence: str) -> Iterator[Finding]:
    if is_chinese(sentence):
        pattern = (
            r"(?:(?:最终|最后|已经|刚刚?|一致|正式)?(?:决定|确定|定了|敲定|选定|拍板|商定)|"
            r"(?:最终|最后|还是)(?:选了|选择了?|选用了?|采用了?|用了))(?:了|下来)?[，,：:]?"
            r"(?P<x>[^，。；！？,;!?]{2,40})"
        )
        reason = REASON_ZH
    else:
        pattern = (
            # The subject is optional ("Our CTO, Raj, decided to ..."); "agreed" needs to/on/that.
            r"(?:(?:\b(?:we|I|the team|team|they)\s*(?:have\s+|'ve\s+|'ll\s+|will\s+|finally\s+|just\s+)*)?"
            r"\b(?:decided|agreed(?=\s+(?:to|on|that)\b)|chose|chosen|settled|opted|are going with|"
            r"'re going with|went with|picked|voted)|\b(?:we|I)(?:'ll|\s+will)?\s+go with|"
            r"\bdecision:(?!\s*(?:we|I|the team)\b))\s+"
            r"(?:to\s+|on\s+|with\s+|for\s+|that\s+)?(?P<x>[^,.;!?]+?)(?=\s*(?:,\s*)?\b(?:because|since|as|"
            r"due to|"
            r"given that|so that|so we can)\b|[,.;!?]|$)"
        )
        reason = REASON_EN
    for match in re.finditer(pattern, sentence, IGNORE):
        decision = match.group("x").strip()
        before = re.findall(r"[A-Za-z']+", sentence[: match.start()])
        if before and before[-1].lower() in ("you", "he", "she", "they", "him", "her", "who"):
            continue  # someone else's choice
        if re.fullmatch(r"(?:it|them|that|this|one)", decision, IGNORE):
            continue
        found = re.search(reason, sentence, IGNORE)
        why = found.group("r").strip() if found else None
        if why and not is_chinese(decision) and why.lower().startswith("well as"):
            why = None
        reason_pattern = REASON_ZH if is_chinese(decision) else REASON_EN
        decision = re.sub(reason_pattern, "", decision, flags=IGNORE).strip()
        topic, decision = _topic(decision), _decision_text(decision)
        if len(decision) < 2:
            continue
        yield Finding(
            "decision",
            f"decision_{topic}",
            {"decision": decision, "reason": why},
            (match.start(), found.end() if found and found.start() > match.start() else match.end()),
            guards=TEAM,
        )


NOT_TOPIC = (
    r"(?!(?:the|our|this|that|your|is|are|was|were|and|but|I|we|you|it|he|she|they|everything|nothing)\b)"
)
WORDS = rf"{NOT_TOPIC}(?:{NOT_TOPIC}[A-Za-z][\w-]*\s+){{0,3}}{NOT_TOPIC}[A-Za-z][\w-]*"
STATUS_WORDS_EN = {
    "done": "done",
    "finished": "done",
    "completed": "done",
    "complete": "done",
    "shipped": "done",
    "deployed": "done",
    "live": "done",
    "launched": "done",
    "merged": "done",
    "released": "done",
    "blocked": "blocked",
    "stuck": "blocked",
    "on hold": "paused",
    "paused": "paused",
    "delayed": "delayed",
    "behind schedule": "delayed",
    "in progress": "in_progress",
    "underway": "in_progress",
    "in review": "in_review",
    "started": "in_progress",
    "cancelled": "cancelled",
    "canceled": "cancelled",
    "on track": "on_track",
    "ahead of schedule": "on_track",
}
STATUS_WORDS_ZH = {
    "完成了": "done",
    "做完了": "done",
    "搞定了": "done",
    "上线了": "done",
    "发布了": "done",
    "交付了": "done",
    "结束了": "done",
    "合并了": "done",
    "部署了": "done",
    "完工了": "done",
    "完成": "done",
    "卡住了": "blocked",
    "被阻塞": "blocked",
    "阻塞了": "blocked",
    "受阻": "blocked",
    "延期了": "delayed",
    "推迟了": "delayed",
    "延后了": "delayed",
    "暂停了": "paused",
    "搁置了": "paused",
    "进行中": "in_progress",
    "在进行": "in_progress",
    "开始了": "in_progress",
    "启动了": "in_progress",
    "取消了": "cancelled",
}
TOPIC_TRIM_ZH = re.compile(r"^(我们的?|咱们的?|目前|现在|这个|那个|项目的?|整个|的|了|把)+")


def _percent(text: str) -> int | None:
    if text in ("一半", "过半", "大半", "half"):
        return 50
    text = text.replace("百分之", "")
    value = to_number(text)
    return int(value) if isinstance(value, int | float) and 0 <= value <= 100 else None


def status(sentence: str) -> Iterator[Finding]:
    if is_chinese(sentence):
        yield from _status_zh(sentence)
        return
    for match in re.finditer(
        rf"\b(?P<p>\d{{1,3}})\s*%\s+(?:through|into|done with|complete on|finished with)\s+"
        rf"(?:the\s+|our\s+)?(?P<t>{WORDS})",
        sentence,
        IGNORE,
    ):
        yield Finding(
            "status",
            f"status_{slug(match.group('t'), 3)}",
            {"status": "in_progress", "progress": _percent(match.group("p"))},
            match.span(),
            guards=frozenset({"question"}),
        )
        return
    progress = (
        rf"\b(?:the\s+|our\s+)?(?P<t>{WORDS})\s+(?:is|are|'s|has been|is now|are now)\s+"
        r"(?:now\s+|about\s+|roughly\s+|almost\s+|nearly\s+|around\s+|already\s+)?(?P<p>\d{1,3})\s*%\s*"
        r"(?:done|complete|completed|finished|through|there|migrated|ready)"
    )
    for match in re.finditer(progress, sentence, IGNORE):
        topic = slug(re.sub(r"^(?:the|our)\s+", "", match.group("t"), flags=IGNORE), 3)
        yield Finding(
            "status",
            f"status_{topic}",
            {"status": "in_progress", "progress": _percent(match.group("p"))},
            match.span(),
            guards=frozenset({"question"}),
        )
    for match in re.finditer(
        r"\b(?P<p>\d{1,3})\s*%\s+of\s+(?:the\s+|our\s+)?(?P<t>[A-Za-z][\w -]{1,40}?)\s+"
        r"(?:is|are|has been|have been)\s+(?:done|complete|completed|finished|migrated)",
        sentence,
        IGNORE,
    ):
        yield Finding(
            "status",
            f"status_{slug(match.group('t'), 3)}",
            {"status": "in_progress", "progress": _percent(match.group("p"))},
            match.span(),
            guards=frozenset({"question"}),
        )
    words = "|".join(sorted((re.escape(w) for w in STATUS_WORDS_EN), key=len, reverse=True))
    for match in re.finditer(
        rf"\b(?P<t>(?:the\s+|our\s+)?{WORDS})\s+(?:is|are|has been|have been|was|"
        rf"got|is now|are now)\s+(?:now\s+|finally\s+|officially\s+|fully\s+|still\s+)?"
        rf"(?P<s>{words})\b",
        sentence,
        IGNORE,
    ):
        state = STATUS_WORDS_EN[match.group("s").lower()]
        progress_value = 100 if state == "done" else None
        topic = slug(re.sub(r"^(?:the|our)\s+", "", match.group("t"), flags=IGNORE), 3)
        yield Finding(
            "status",
            f"status_{topic}",
            {"status": state, "progress": progress_value},
            match.span(),
            guards=TEAM,
        )
    for match in re.finditer(
        r"\bwe(?:'ve| have)?\s+(?:just\s+|finally\s+)?(?P<s>finished|completed|shipped|launched|"
        r"deployed|released|merged)\s+(?:the\s+|our\s+)?(?P<t>[A-Za-z][\w -]{1,40}?)(?=[,.;!?]|$|"
        r"\s+(?:today|yesterday|last|this|on|and)\b)",
        sentence,
        IGNORE,
    ):
        yield Finding(
            "status",
            f"status_{slug(match.group('t'), 3)}",
            {"status": "done", "progress": 100},
            match.span(),
            guards=TEAM,
        )
    for match in re.finditer(
        r"\bwe(?:'re| are)\s+(?:about\s+)?halfway\s+(?:through|done with)\s+(?:the\s+)?"
        r"(?P<t>[A-Za-z][\w -]{1,40}?)(?=[,.;!?]|$)",
        sentence,
        IGNORE,
    ):
        yield Finding(
            "status",
            f"status_{slug(match.group('t'), 3)}",
            {"status": "in_progress", "progress": 50},
            match.span(),
            guards=TEAM,
        )


def _status_zh(sentence: str) -> Iterator[Finding]:
    # A bare number needs % unless the word 进度 names it a progress figure (做了6年 is no status).
    pct = r"(?P<p>\d{1,3}\s*[%％]|百分之[零一二两三四五六七八九十百]+|一半|过半|大半)"
    progress = (
        rf"(?P<t>[{CJK}A-Za-z0-9]{{2,14}}?)(?:的)?(?:进度|目前|现在|已经|已|大概|基本|差不多)*"
        rf"(?:(?:完成了?|做了|做完了?|进行到了?|推进到了?|迁移了)(?:大概|约|差不多|将近)?\s*{pct}|"
        rf"进度(?:是|为|到了?)?(?:大概|约|差不多|将近)?\s*(?P<p2>\d{{1,3}})\s*[%％]?)"
    )
    for match in re.finditer(progress, sentence):
        topic = TOPIC_TRIM_ZH.sub("", match.group("t")) or match.group("t")
        yield Finding(
            "status",
            f"status_{slug(topic, 2)}",
            {
                "status": "in_progress",
                "progress": _percent(re.sub(r"[%％\s]", "", match.group("p") or match.group("p2"))),
            },
            match.span(),
            guards=frozenset({"question"}),
        )
        return
    words = "|".join(sorted(STATUS_WORDS_ZH, key=len, reverse=True))
    for match in re.finditer(
        rf"(?P<t>[{CJK}A-Za-z0-9]{{2,14}}?)(?P<m>(?:已经|已|都|终于|还|目前|正在|仍|仍在|基本|没有|没|未|尚未)*)"
        rf"(?P<s>{words})",
        sentence,
    ):
        topic = TOPIC_TRIM_ZH.sub("", re.sub(r"(还|已|都)$", "", match.group("t")))
        if len(topic) < 2 or topic in ("我们", "我", "他", "她", "大家"):
            continue
        state = STATUS_WORDS_ZH[match.group("s")]
        if re.search(r"(没|未)", match.group("m")):  # 还没完成: not done yet
            state = "in_progress" if state == "done" else state
        yield Finding(
            "status",
            f"status_{slug(topic, 2)}",
            {"status": state, "progress": 100 if state == "done" else None},
            match.span(),
            guards=TEAM,
        )
        return


RULES: tuple[Rule, ...] = (decisions, status)
