"""A small loaded dataset for the access tests, built once per session through the real stages:
ingest (one bad record) -> extract (offline provider) -> rollup -> reflect -> embed -> expire.

Two subjects in one namespace of their own: a Chinese consulting client (u_zh) and an English project
team member (u_en), messages from 40 days ago up to today, so L1, L2, L3, insights, quarantine, the LLM
ledger and a deletion report all have rows in that namespace.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from strataflow.config import Settings

ZH_MESSAGES = [
    (40, "你好，我想咨询一下香港的移民项目。"),
    (39, "我今年二十八岁，目前在杭州的阿里巴巴做软件工程师。"),
    (38, "我是浙大计算机专业毕业的，本科学历。"),
    (33, "我的年薪大概五十万，工作经验有六年了。"),
    (26, "我想申请香港的高才通计划，希望明年上半年能拿到签证。"),
    (19, "我已婚，有一个孩子，今年三岁。"),
    (12, "上周我整理了学历认证和工作证明材料。"),
    (5, "我比较喜欢用微信沟通，邮件回复会慢一些。"),
]
EN_MESSAGES = [
    (36, "Hi, I'm Dana, I lead the data platform team at Northwind."),
    (
        29,
        "We decided to use PostgreSQL with pgvector for the memory store because it keeps operations simple.",
    ),
    (
        22,
        "Status update: the ingest pipeline is about 80 percent done, the CSV export parser is finished.",
    ),
    (15, "I prefer short written summaries over long meetings."),
    (9, "We decided to postpone the dashboard work until the retrieval benchmark passes."),
    (4, "Feedback: the weekly report was too long, please keep it under ten lines."),
]
TODAY_ZH = "今天我在准备香港签证的材料，下午要去公证处。"
TODAY_EN = "Today I'm reviewing the retrieval benchmark numbers with the team."


@dataclass(frozen=True)
class AccessData:
    namespace: str
    log_path: Path
    counts: dict[str, Any]


def _record(subject: str, index: int, content: str, at: datetime, conversation: str) -> dict[str, Any]:
    return {
        "conversation_id": conversation,
        "subject_id": subject,
        "source_message_id": f"{subject}-{index}",
        "role": "user",
        "content": content,
        "created_at": at.isoformat(),
    }


def write_sample_logs(directory: Path, settings: Settings) -> Path:
    """A JSONL log: both subjects' messages, a reply each, today's messages, and one bad record."""
    now = datetime.now(settings.tz)
    noon = datetime.combine(now.date(), time(12, 0), tzinfo=settings.tz)
    records = []
    for subject, messages, conversation in (("u_zh", ZH_MESSAGES, "zh-1"), ("u_en", EN_MESSAGES, "en-1")):
        for index, (days_ago, content) in enumerate(messages):
            at = noon - timedelta(days=days_ago)
            records.append(_record(subject, index, content, at, conversation))
            reply = {
                **_record(
                    subject,
                    index,
                    "好的，已记录。" if subject == "u_zh" else "Noted, thanks.",
                    at,
                    conversation,
                )
            }
            reply.update(role="assistant", source_message_id=f"{subject}-{index}-reply",
                         created_at=(at + timedelta(minutes=1)).isoformat())  # fmt: skip
            records.append(reply)
    today_at = min(now - timedelta(minutes=5), noon) if now.time() > time(0, 10) else now
    records.append(_record("u_zh", 99, TODAY_ZH, today_at, "zh-1"))
    records.append(_record("u_en", 99, TODAY_EN, today_at, "en-1"))
    bad = _record("u_zh", 100, "坏记录", noon, "zh-1")
    records.append({**bad, "created_at": "not a time"})
    path = directory / "access_sample.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def access_data(engine: Engine, settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> AccessData:
    """The dataset above, loaded through the real stages into a namespace of its own."""
    from tasks.embed import embed_pending
    from tasks.expire import expire_l1
    from tasks.extract import extract_new
    from tasks.ingest import ingest_logs
    from tasks.reflect import reflect_pending
    from tasks.rollup import rollup_weeks

    namespace = f"t_access_{uuid.uuid4().hex[:8]}"
    path = write_sample_logs(tmp_path_factory.mktemp("access"), settings)
    counts: dict[str, Any] = {}
    counts["ingest"] = ingest_logs(settings, [path], namespace=namespace, progress=False).model_dump(
        mode="json"
    )
    counts["extract"] = extract_new(settings, namespace=namespace, progress=False).model_dump(mode="json")
    counts["rollup"] = rollup_weeks(settings, namespace=namespace).model_dump(mode="json")
    counts["reflect"] = reflect_pending(settings, namespace=namespace).model_dump(mode="json")
    counts["embed"] = embed_pending(settings, progress=False, namespace=namespace).model_dump(mode="json")
    counts["expire"] = expire_l1(settings, namespace=namespace).model_dump(mode="json")
    return AccessData(namespace=namespace, log_path=path, counts=counts)
