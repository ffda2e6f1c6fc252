"""The embedder (real local model) and the embedding cache in front of it."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
from sqlalchemy import Connection, text

from strataflow.config import Settings
from strataflow.hashes import content_hash
from strataflow.llm.embeddings import (
    EmbeddingError,
    embed_texts,
    embed_texts_counted,
    encode_count,
    get_embedder,
)


def test_local_embedder_gives_unit_float32_vectors_that_rank_paraphrases_first(settings: Settings) -> None:
    embedder = get_embedder(settings)
    vectors = embedder.encode(
        ["The deploy is blocked by a failing test.", "A broken test stops the release.", "我喜欢吃北京烤鸭"]
    )
    assert (embedder.model_name, embedder.dim) == ("all-MiniLM-L6-v2", 384)
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_get_embedder_returns_one_instance_per_model_per_process(settings: Settings) -> None:
    assert get_embedder(settings) is get_embedder(settings)


def test_embed_texts_encodes_identical_texts_once_and_serves_a_rerun_from_the_cache(
    conn: Connection, settings: Settings
) -> None:
    tag = uuid.uuid4().hex
    texts = [
        f"status update {tag}: QA passed",
        f"decision {tag}: ship on Friday",
        f"status update {tag}: QA passed",
    ]
    before = encode_count()
    first, not_encoded = embed_texts_counted(conn, settings, texts)
    assert encode_count() - before == 2  # the repeated text is encoded once
    assert not_encoded == 1
    np.testing.assert_array_equal(first[0], first[2])
    cached = conn.execute(
        text("select count(*) from embedding_cache where model = :m and content_hash = any(:h)"),
        {"m": "all-MiniLM-L6-v2", "h": [content_hash(t) for t in texts]},
    ).scalar_one()
    assert cached == 2

    before = encode_count()
    again = embed_texts(conn, settings, list(reversed(texts)))
    assert encode_count() - before == 0
    np.testing.assert_allclose(np.vstack(again), np.vstack(list(reversed(first))), atol=1e-6)


def test_embed_texts_of_nothing_is_nothing(conn: Connection, settings: Settings) -> None:
    assert embed_texts(conn, settings, []) == []


class FakeEmbeddingServer(ThreadingHTTPServer):
    """An OpenAI-compatible /v1/embeddings on 127.0.0.1: the first request gets a 429, then vectors derived
    from each text (not normalised, so the test sees ours normalise them)."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _EmbeddingHandler)
        self.requests: list[list[str]] = []
        self.fail_first = True


class _EmbeddingHandler(BaseHTTPRequestHandler):
    server: FakeEmbeddingServer

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        texts = body["input"]
        self.server.requests.append(texts)
        if body["model"].startswith("denied"):
            self._reply(401, {"error": {"message": "invalid api key", "type": "invalid_request_error"}})
            return
        if self.server.fail_first:
            self.server.fail_first = False
            self._reply(429, {"error": {"message": "slow down", "type": "rate_limit_error"}})
            return
        data = [
            {"object": "embedding", "index": i, "embedding": fake_vector(t).tolist()}
            for i, t in enumerate(texts)
        ]
        usage = {"prompt_tokens": len(texts), "total_tokens": len(texts)}
        self._reply(200, {"object": "list", "data": data, "model": body["model"], "usage": usage})

    def _reply(self, status: int, payload: dict) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: object) -> None:
        pass


def fake_vector(text_: str) -> np.ndarray:
    seed = int(content_hash(text_)[:8], 16)
    return np.random.default_rng(seed).normal(size=384).astype(np.float32) * 3.0


@pytest.fixture
def fake_server() -> Iterator[FakeEmbeddingServer]:
    server = FakeEmbeddingServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_litellm_embedding_model_is_called_in_batches_retried_by_us_and_normalised(
    fake_server: FakeEmbeddingServer, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    remote = settings.model_copy(
        update={
            "embedding_model": f"openai/fake-embed-{uuid.uuid4().hex[:6]}",
            "llm_api_base": f"http://127.0.0.1:{fake_server.server_address[1]}/v1",
            "embed_batch_size": 2,
            "llm_max_retries": 1,
        }
    )
    embedder = get_embedder(remote)
    texts = ["alpha", "beta", "gamma"]
    vectors = embedder.encode(texts)
    # one 429 (retried once by us, not by litellm or the SDK), then two batches of at most 2 texts
    assert fake_server.requests == [["alpha", "beta"], ["alpha", "beta"], ["gamma"]]
    expected = np.vstack([fake_vector(t) for t in texts])
    np.testing.assert_allclose(vectors, expected / np.linalg.norm(expected, axis=1, keepdims=True), rtol=1e-5)


def test_a_litellm_model_with_the_wrong_vector_size_is_a_clear_error(
    fake_server: FakeEmbeddingServer, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    fake_server.fail_first = False
    remote = settings.model_copy(
        update={
            "embedding_model": f"openai/fake-embed-{uuid.uuid4().hex[:6]}",
            "llm_api_base": f"http://127.0.0.1:{fake_server.server_address[1]}/v1",
        }
    )
    embedder = get_embedder(remote)
    embedder.dim = 512  # as if STRATAFLOW_EMBEDDING_DIM said 512 for a 384-d model
    with pytest.raises(EmbeddingError, match=r"returned vectors of shape \(1, 384\), expected \(1, 512\)"):
        embedder.encode(["alpha"])


def test_a_refused_litellm_request_is_a_clear_error_without_retries(
    fake_server: FakeEmbeddingServer, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "wrong-key")
    remote = settings.model_copy(
        update={
            "embedding_model": f"openai/denied-{uuid.uuid4().hex[:6]}",
            "llm_api_base": f"http://127.0.0.1:{fake_server.server_address[1]}/v1",
            "llm_max_retries": 3,
        }
    )
    with pytest.raises(EmbeddingError, match="refused the request"):
        get_embedder(remote).encode(["alpha"])
    assert len(fake_server.requests) == 1
