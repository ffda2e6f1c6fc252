"""One multilingual space for L1 turns, L3 reports and asset chunks (sql/401, issue 44), as for items
(test_multilingual_items.py): an English row gets a multilingual-e5-small vector with its own (the embed stage
for turns and reports, the asset ingest for chunks), a Chinese row's own vector is already multilingual, so a
Chinese question finds an English row first and an English question a Chinese one, in an exact scope and
through the HNSW indexes of a wide one; `strataflow embed` fills the vector of older rows while search keeps
working; a search or a context call encodes the query at most once per model."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, text

from strataflow.config import Settings
from strataflow.llm.embeddings import encode_count
from strataflow.pipeline.assets import ingest_assets
from strataflow.pipeline.embed import embed_pending
from strataflow.retrieval.context import build_context
from strataflow.retrieval.search import EXACT_LIMIT, search

SUBJECT = "u5c2e81d0"  # an opaque id
TURNS = {  # fact -> a question in the other language
    "I adopted a golden retriever puppy named Max last spring.": "我的狗叫什么名字？",
    "My sister is getting married in Lisbon in June.": "我姐姐在哪里举行婚礼？",
    "I switched jobs and now work as a nurse at the children's hospital.": "我现在做什么工作？",
    "我上个月在成都买了一套公寓。": "Where did I buy an apartment last month?",
    "我女儿在学钢琴，每周六上课。": "What instrument is my daughter learning?",
    "我对海鲜过敏，尤其是虾。": "What food am I allergic to?",
}
REPORTS = {
    "Weekly summary: the user planned a hiking trip to Patagonia with two friends.": "用户计划去哪里徒步？",
    "Weekly summary: the user repaired the roof of the garage after a storm.": "暴风雨过后用户修好了什么？",
    "本周总结：用户开始学习日语，并报名参加了十月的考试。": "What language did the user start learning?",
    "本周总结：用户把旧车卖了，买了一辆电动自行车。": "What kind of bike did the user buy?",
}
CHUNKS = {
    "Expense reports must be submitted within 30 days of purchase, with the receipts attached.": (
        "报销单必须在多少天内提交？"
    ),
    "Visitors connect to the guest Wi-Fi network; its password changes every quarter.": "访客用哪个网络？",
    "公司员工每年有十五天带薪年假，需要提前两周申请。": "How many days of paid leave do employees get?",
    "停车场位于大楼地下二层，员工刷工牌进入。": "Where is the staff car park?",
}
INSERT_REPORT = text(
    """
    insert into weekly_reports (namespace, subject_id, week_start, week_end, summary, input_hash)
    values (:ns, :subject, :week_start, :week_start + 6, :summary, 'h')
    """
)
MULTI = """
    select {text} as body, embedding_model, embedding_multi_model, embedding_multi is not null as has_multi
    from {table} where namespace = :ns
"""
TABLES = {"messages": ("conversation_messages", "content"), "reports": ("weekly_reports", "summary")}
TABLES["assets"] = ("asset_chunks", "content")
CLEAR_MULTI = "update {table} set embedding_multi = null, embedding_multi_model = null where namespace = :ns"


def week(n: int) -> datetime:
    """A week of its own for each test's turns (L1's weekly partitions: their own HNSW index)."""
    return datetime(2019, 1, 7, 9, tzinfo=UTC) + timedelta(weeks=n)


@pytest.fixture
def memory(
    engine: Engine, settings: Settings, namespace: str, tmp_path: Path, write_messages: Callable[..., None]
) -> Iterator[str]:
    """The turns, reports and chunks of one subject, ingested and embedded as the pipeline does."""
    start = week(int(namespace[2:], 16) % 300)
    with engine.begin() as conn:
        messages = [  # a conversation in each language (a turn's window is its conversation's turns)
            {
                "content": fact,
                "subject_id": SUBJECT,
                "conversation_id": "en" if fact.isascii() else "zh",
                "created_at": start + timedelta(hours=n),
            }
            for n, fact in enumerate(TURNS)
        ]
        write_messages(conn, settings, namespace, messages)
        for n, summary in enumerate(REPORTS):
            monday = date(2024, 1, 1) + timedelta(weeks=n)
            conn.execute(
                INSERT_REPORT, {"ns": namespace, "subject": SUBJECT, "week_start": monday, "summary": summary}
            )
    for n, content in enumerate(CHUNKS):
        (tmp_path / f"policy_{n}.md").write_text(content + "\n", encoding="utf-8")
    ingest_assets(settings, sorted(tmp_path.glob("*.md")), namespace)
    embed_pending(settings, progress=False, namespace=namespace)
    yield namespace


def rows(engine: Engine, layer: str, namespace: str) -> list[Any]:
    table, body = TABLES[layer]
    with engine.connect() as conn:
        return list(conn.execute(text(MULTI.format(text=body, table=table)), {"ns": namespace}))


def first(engine: Engine, settings: Settings, namespace: str, layer: str, query: str, **kw: Any) -> Any:
    with engine.connect() as conn:
        hits = search(conn, settings, namespace, query, kw.pop("subject_id", SUBJECT), layers=[layer], **kw)
    assert hits, (layer, query)
    return hits[0]


FACTS = {"messages": TURNS, "reports": REPORTS, "assets": CHUNKS}


@pytest.mark.parametrize("layer", ["messages", "reports", "assets"])
def test_an_english_row_gets_a_multilingual_vector_and_a_chinese_one_keeps_its_own(
    engine: Engine, settings: Settings, memory: str, layer: str
) -> None:
    multi = settings.embed_cjk_model
    found = rows(engine, layer, memory)
    assert sorted(row.body.strip() for row in found) == sorted(FACTS[layer])
    for row in found:
        english = row.embedding_model != multi
        assert (row.has_multi, row.embedding_multi_model) == (english, multi if english else None), row


@pytest.mark.parametrize("layer", ["messages", "reports", "assets"])
def test_a_question_in_the_other_language_finds_the_row_first(
    engine: Engine, settings: Settings, memory: str, layer: str
) -> None:
    for fact, question in FACTS[layer].items():
        hit = first(engine, settings, memory, layer, question)
        assert hit.text.strip() == fact, (question, hit.text, hit.score)
        assert hit.metadata["exact"] is True


@pytest.mark.parametrize("layer", ["messages", "reports", "assets"])
def test_the_backfill_fills_older_rows_and_a_mixed_table_still_searches(
    engine: Engine, settings: Settings, memory: str, layer: str
) -> None:
    table, _ = TABLES[layer]
    with engine.begin() as conn:  # as rows embedded before sql/401
        conn.execute(text(CLEAR_MULTI.format(table=table)), {"ns": memory})
        conn.execute(  # and half of them given theirs already: a table in the middle of the backfill
            text(
                f"update {table} set embedding_multi = null where namespace = :ns and ctid in "
                f"(select ctid from {table} where namespace = :ns limit 1)"
            ),
            {"ns": memory},
        )
    english = [fact for fact in FACTS[layer] if not any("\u4e00" <= ch <= "\u9fff" for ch in fact)]
    for fact, question in FACTS[layer].items():  # mixed: every question still answered, in some order
        with engine.connect() as conn:
            hits = search(conn, settings, memory, question, SUBJECT, layers=[layer])
        assert fact in [hit.text.strip() for hit in hits]
    done = embed_pending(settings, progress=False, namespace=memory)
    assert getattr(done, f"{table}_multi") == len(english)
    assert all(row.has_multi for row in rows(engine, layer, memory) if row.body.strip() in english)
    for fact, question in FACTS[layer].items():
        assert first(engine, settings, memory, layer, question).text.strip() == fact
    assert getattr(embed_pending(settings, progress=False, namespace=memory), f"{table}_multi") == 0


@pytest.mark.parametrize("layer", ["messages", "reports", "assets"])
def test_a_wide_search_reaches_rows_of_the_other_language_through_the_multilingual_index(
    engine: Engine, settings: Settings, memory: str, layer: str
) -> None:
    """Without a subject and over exact_limit rows, candidates come from the indexes: a question shares no
    word with a row of the other language, so only the HNSW nearest rows of the multilingual space reach
    it (embedding_multi for a Chinese question; a Chinese row's own embedding for an English one)."""
    for fact, question in FACTS[layer].items():
        with engine.connect() as conn:
            hits = search(conn, settings, memory, question, None, layers=[layer], exact_limit=1)
        found = [hit.text.strip() for hit in hits]
        assert fact in found and not hits[0].metadata["exact"], (question, found)  # reached
        if question not in WIDE_NOT_FIRST:
            assert found[0] == fact, (question, found)


# Namespace-wide, without a subject, a question keeps its 我 (within a subject it is taken off as the
# subject's reference): 我现在做什么工作？ meets the Chinese turns that say 我 in their own space (and their
# windows, Chinese turns too): 0.451 and 0.438 for two of them against 0.413 for the nurse turn (its dense
# part is the best, -0.53 logits against -0.66), which is first within the subject.
WIDE_NOT_FIRST = {"我现在做什么工作？"}


def test_a_search_and_a_context_call_encode_the_query_once_per_model(
    engine: Engine, settings: Settings, memory: str
) -> None:
    """A Chinese question over English and Chinese rows needs the query under both models: two encodes for
    a search of every layer, exact or wide, and for a context call; asked again, none (the query cache)."""
    for subject, limit in [(SUBJECT, EXACT_LIMIT), (None, 1)]:
        question = f"我的狗叫什么名字？（{uuid.uuid4().hex[:6]}）"
        before = encode_count()
        first(engine, settings, memory, "messages", question, subject_id=subject, exact_limit=limit)
        with engine.connect() as conn:  # every layer
            search(conn, settings, memory, question, subject, exact_limit=limit)
        assert encode_count() - before == 2, subject
    question = f"我姐姐在哪里举行婚礼？（{uuid.uuid4().hex[:4]}）"
    before = encode_count()
    with engine.connect() as conn:
        found = build_context(conn, settings, memory, SUBJECT, question)
    assert encode_count() - before <= 2
    assert "Lisbon" in found.text
