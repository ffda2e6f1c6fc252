"""One multilingual space for L2 items (sql/400, issue 44): an English item gets a multilingual-e5-small
vector when it is written, so a Chinese question about it meets it, and an English question meets a Chinese
item in that space too; both are scored under the cross-language calibration (ranking.CALIBRATION, fitted by
bench.fit_ranking), under opaque subject ids. `strataflow embed` fills the vector for items without it."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, text

from strataflow.adapters.mem0 import ENTRY_TYPE
from strataflow.adapters.mem0_names import mem0_entry_name
from strataflow.config import Settings
from strataflow.memory import api
from strataflow.pipeline.embed import embed_pending
from strataflow.retrieval.item_search import search_memories
from strataflow.retrieval.ranking import CALIBRATION, canonical_model, cross_language

ENGLISH = {  # under an opaque id: facts as a user tells them
    "I teach chemistry at a secondary school in Bristol.": "我是做什么工作的？",
    "My dog is called Biscuit and loves the beach.": "我的狗叫什么名字？",
    "I am allergic to peanuts.": "我对什么东西过敏？",
}
CHINESE = {
    "我在杭州开了一家咖啡店。": "What business do I own?",
    "我养了一只叫豆豆的猫。": "What is my cat called?",
    "我每天早上跑五公里。": "How far do I run every morning?",
}
MULTI = "SELECT statement, embedding_model, embedding_multi_model, embedding_multi IS NOT NULL AS has_multi "
MULTI += "FROM memory_items WHERE namespace = :ns ORDER BY item_id"


def store(engine: Engine, settings: Settings, namespace: str, subject: str, facts: dict[str, str]) -> None:
    with engine.begin() as conn:
        for fact in facts:
            api.create_memory(
                conn, namespace, subject, ENTRY_TYPE, mem0_entry_name(fact), fact, settings=settings
            )


def ask(
    engine: Engine, settings: Settings, namespace: str, subject: str, query: str
) -> list[tuple[str, float]]:
    with engine.connect() as conn:
        hits = search_memories(conn, settings, namespace, query, subject, explain=True)
    for hit in hits:
        assert hit.explain is not None and abs(sum(hit.explain.parts.values()) - hit.explain.logit) < 0.01
    return [(str(hit.statement), hit.score) for hit in hits]


@pytest.mark.parametrize(("facts", "subject"), [(ENGLISH, "u51f0c3aa"), (CHINESE, "u9e22b710")])
def test_a_question_in_the_other_language_finds_the_fact_above_one_half(
    engine: Engine, settings: Settings, namespace: str, facts: dict[str, str], subject: str
) -> None:
    store(engine, settings, namespace, subject, facts)
    with engine.connect() as conn:
        rows = conn.execute(text(MULTI), {"ns": namespace}).all()
    multi = settings.embed_cjk_model
    for row in rows:  # an English item has a second, multilingual vector; a Chinese one's own is multilingual
        english = row.embedding_model != multi
        assert row.has_multi == english and row.embedding_multi_model == (multi if english else None), row
    for fact, question in facts.items():
        hits = ask(engine, settings, namespace, subject, question)
        assert hits[0][0] == fact, (question, hits)
        assert hits[0][1] >= 0.5, (question, hits)
    unrelated = ask(engine, settings, namespace, subject, "How are eigenvalues of a sparse matrix computed?")
    assert max(score for _, score in unrelated) < 0.5
    unrelated = ask(engine, settings, namespace, subject, "稀疏矩阵的特征值怎么计算？")
    assert max(score for _, score in unrelated) < 0.5


def test_the_same_language_is_scored_as_before(engine: Engine, settings: Settings, namespace: str) -> None:
    """A question in its facts' language compares them in their own space (an English item's MiniLM vector),
    not in the multilingual one: its dense part is under that model's calibration."""
    store(engine, settings, namespace, "u0d3c9e41", ENGLISH)
    with engine.connect() as conn:
        hits = search_memories(conn, settings, namespace, "What do I do for work?", "u0d3c9e41", explain=True)
    assert hits[0].statement == "I teach chemistry at a secondary school in Bristol."
    assert hits[0].score >= 0.5


def test_the_cross_language_calibration_has_its_own_name() -> None:
    cross = cross_language("intfloat/multilingual-e5-small")
    assert canonical_model(cross) == "multilingual-e5-small:cross"
    assert CALIBRATION[canonical_model(cross)] != CALIBRATION["multilingual-e5-small"]


def test_embed_fills_the_multilingual_vector_of_older_items_and_a_rerun_encodes_nothing(
    engine: Engine, settings: Settings, namespace: str
) -> None:
    store(engine, settings, namespace, "u77aa01be", ENGLISH)
    with engine.begin() as conn:  # as items written before sql/400
        conn.execute(
            text(
                "UPDATE memory_items SET embedding_multi = NULL, embedding_multi_model = NULL "
                "WHERE namespace = :ns"
            ),
            {"ns": namespace},
        )
    assert ask(engine, settings, namespace, "u77aa01be", "我对什么东西过敏？")  # searchable throughout
    done = embed_pending(settings, progress=False, namespace=namespace)
    assert done.memory_items_multi == len(ENGLISH)
    with engine.connect() as conn:
        assert all(row.has_multi for row in conn.execute(text(MULTI), {"ns": namespace}))
    hits = ask(engine, settings, namespace, "u77aa01be", "我对什么东西过敏？")
    assert hits[0] == ("I am allergic to peanuts.", hits[0][1]) and hits[0][1] >= 0.5
    assert embed_pending(settings, progress=False, namespace=namespace).memory_items_multi == 0


def test_a_new_statement_without_a_new_vector_clears_the_old_one(
    engine: Engine, settings: Settings, namespace: str
) -> None:
    store(engine, settings, namespace, "u3b1e0f27", {"I live in Leeds.": ""})
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE memory_items SET statement = 'I live in York.' WHERE namespace = :ns"),
            {"ns": namespace},
        )
        row = conn.execute(text(MULTI), {"ns": namespace}).one()
    assert not row.has_multi and row.embedding_multi_model is None
