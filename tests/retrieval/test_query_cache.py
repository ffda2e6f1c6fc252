"""A repeated query is encoded once: embed_query (the search's and context's query vector) goes through the
process's query cache, keyed by (model, text), and a cache hit encodes nothing (real local model)."""

from __future__ import annotations

import uuid

import numpy as np

from strataflow.config import Settings
from strataflow.llm.embeddings import encode_count, get_embedder, query_embeddings
from strataflow.retrieval.search import embed_query, start_embedding


def test_a_repeated_query_is_encoded_once_and_gets_the_same_vector(settings: Settings) -> None:
    query = f"where does she work now {uuid.uuid4().hex[:6]}"
    before = encode_count()
    first = embed_query(settings, query)
    assert encode_count() == before + 1
    again = embed_query(settings, query)
    pending = start_embedding(settings, query).result()
    assert encode_count() == before + 1  # the cache answered both
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(first, pending)
    # the same vector as the model gives and as query_embeddings' entry for the configured model
    expected = get_embedder(settings).encode_queries([query])[0]
    np.testing.assert_allclose(first, expected, atol=1e-6)
    model = settings.embedding_model
    assert query_embeddings(settings, query, models=[model])[model] is first


def test_a_different_query_is_encoded_not_served_from_the_cache(settings: Settings) -> None:
    one = embed_query(settings, f"her cat is called Mochi {uuid.uuid4().hex[:6]}")
    before = encode_count()
    other = embed_query(settings, f"the meeting moved to Friday {uuid.uuid4().hex[:6]}")
    assert encode_count() == before + 1
    assert float(one @ other) < 0.99
