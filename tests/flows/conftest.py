"""Helpers for the flow tests: small bilingual logs as daily export files (one JSONL file per day, the date
in the file name), in complete ISO weeks two and three weeks back so the rollup covers them and nothing is
old enough to expire."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

DAY_MESSAGES: list[list[tuple[str, str, str]]] = [
    [
        ("zh-1", "user", "您好，我想咨询香港优才计划。"),
        ("zh-1", "user", "我今年32岁，浙大计算机硕士毕业的，现在在杭州做前端开发，工作8年了，年薪大概80万"),
        ("zh-1", "assistant", "好的，了解了，我们先看看您的条件。"),
        ("en-1", "user", "We decided to use PostgreSQL for the memory store because it has pgvector."),
    ],
    [
        ("zh-1", "user", "我已婚，有两个孩子。我们打算明年申请。"),
        ("en-1", "user", "Status update: the ingest pipeline is 80% done."),
        ("en-1", "assistant", "Thanks, noted."),
    ],
    [
        ("en-1", "user", "I prefer short weekly summaries in Markdown, please."),
        ("zh-1", "user", "我更喜欢用微信沟通。"),
    ],
]

WriteLogs = Callable[..., list[Path]]


def log_days() -> list[date]:
    """Monday and Tuesday three weeks back, and the Monday two weeks back: two complete ISO weeks."""
    today = datetime.now(UTC).date()
    monday = today - timedelta(days=today.weekday()) - timedelta(days=21)
    return [monday, monday + timedelta(days=1), monday + timedelta(days=7)]


@pytest.fixture
def write_logs() -> WriteLogs:
    """write_logs(folder, tag="") -> one JSONL file per day (chat-YYYY-MM-DD.jsonl), messages an hour apart.

    A tag is appended to every message, so its texts miss the shared embedding and LLM caches."""

    def write(folder: Path, tag: str = "") -> list[Path]:
        letters = tag.translate(str.maketrans("0123456789_", "ghijklmnopq"))  # no digits for the rules
        folder.mkdir(parents=True, exist_ok=True)
        files = []
        for day, messages in zip(log_days(), DAY_MESSAGES, strict=True):
            path = folder / f"chat-{day.isoformat()}.jsonl"
            with path.open("w", encoding="utf-8") as out:
                for number, (conversation, role, content) in enumerate(messages):
                    moment = datetime.combine(day, time(9 + number), tzinfo=UTC)
                    record = {
                        "conversation_id": conversation,
                        "subject_id": "client-zh" if conversation.startswith("zh") else "team-en",
                        "source_message_id": f"{day.isoformat()}-{number}",
                        "role": role,
                        "content": f"{content} (ref {letters})" if tag else content,
                        "created_at": moment.isoformat(),
                    }
                    out.write(json.dumps(record, ensure_ascii=False) + "\n")
            files.append(path)
        return files

    return write


LAYER_COUNTS = text(
    """
    select
        (select count(*) from message_keys where namespace = :ns) as l1_keys,
        (select count(*) from conversation_messages where namespace = :ns) as l1,
        (select count(*) from conversation_messages where namespace = :ns and embedding is null)
            as l1_unembedded,
        (select count(*) from memory_items where namespace = :ns and kind <> 'hot_summary') as l2,
        (select count(*) from weekly_reports where namespace = :ns) as l3
    """
)


@pytest.fixture
def layers(engine: Engine) -> Callable[[str], dict[str, int]]:
    """layers(namespace) -> row counts per layer of that namespace."""

    def counts(namespace: str) -> dict[str, int]:
        with engine.connect() as conn:
            return dict(conn.execute(LAYER_COUNTS, {"ns": namespace}).mappings().one())

    return counts
