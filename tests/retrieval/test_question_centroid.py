"""Centred similarity (strataflow.retrieval.question_centroid): a statement's similarity to a query is its
cosine less its hubness (its inner product with the mean probe question, above a typical answer's), for the
bundled English model; the CJK model and any other model keep the plain cosine; turns are never centred."""

from __future__ import annotations

import numpy as np
from sqlalchemy import Connection, text

from strataflow.config import Settings
from strataflow.llm.embeddings import as_vector
from strataflow.memory import api
from strataflow.retrieval.question_centroid import PROBE_ANSWERS, PROBE_QUESTIONS, question_centroid
from strataflow.retrieval.search import embed_query, search

FACTS = (
    "Ilse repairs old pianos in a workshop behind her house.",
    "Ilse is allergic to cats.",
    "Ilse spent last winter in Lisbon.",
)


def test_only_the_bundled_english_model_is_centred(settings: Settings) -> None:
    for model in ("multilingual-e5-small", "openai/text-embedding-3-small"):
        centroid, typical = question_centroid(settings, model)
        assert not centroid.any() and typical == 0.0
    centroid, typical = question_centroid(settings, settings.embedding_model)
    assert 0.2 < float(np.linalg.norm(centroid)) < 0.9  # questions share a direction, and are not one point
    assert 0.0 < typical < float(centroid @ centroid)  # a statement lies less along it than the questions
    assert len(PROBE_QUESTIONS) == len(PROBE_ANSWERS)


def test_a_statement_scores_by_its_cosine_less_its_hubness(
    conn: Connection, settings: Settings, namespace: str
) -> None:
    ids = [
        api.create_memory(conn, namespace, "ilse", "user", f"fact {i}", fact, settings=settings).item.id
        for i, fact in enumerate(FACTS)
    ]
    named = search(conn, settings, namespace, "What work does Ilse do?", "ilse", layers=("items",), k=3)
    unnamed = search(conn, settings, namespace, "What work is done?", "ilse", layers=("items",), k=3)
    assert named[0].id == unnamed[0].id == ids[0]
    stored = {
        int(r.item_id): as_vector(r.embedding)
        for r in conn.execute(
            text("select item_id, embedding from memory_items where item_id = any(:ids)"), {"ids": ids}
        )
    }
    query = embed_query(settings, "What work does do?")  # the named query as a subject search embeds it
    centroid, typical = question_centroid(settings, settings.embedding_model)
    plain_query = embed_query(settings, "What work is done?")
    for hit in unnamed:
        row = stored[hit.id]
        cosine = float(row @ plain_query / np.linalg.norm(row) / np.linalg.norm(plain_query))
        centred = cosine - float(row @ centroid) + typical
        assert hit.metadata["dense"] == round(centred, 4)
        assert abs(centred - cosine) > 1e-3  # the hubness moved it: the test would see plain cosine
    # With the subject named, the same centred similarity plus the subject reference, for every row alike.
    gain = {h.id: h.metadata["dense"] for h in named}
    base = {
        i: float(v @ query / np.linalg.norm(v) / np.linalg.norm(query)) - float(v @ centroid) + typical
        for i, v in stored.items()
    }
    offsets = {round(gain[i] - base[i], 3) for i in ids}
    assert len(offsets) == 1 and offsets.pop() > 0.3
