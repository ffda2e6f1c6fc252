"""The one absolute score through the real service: a memory scores the same for a query on the native search,
/v1/memories/search, /v1/context's JSON pieces and /mem0 search, whatever else is stored, and `threshold`
filters on it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from mem0 import MemoryClient
from sqlalchemy import Engine

from strataflow.config import Settings
from strataflow.retrieval.search import search
from tests.fixtures.service import Tenant

FACTS = [
    "Dora has two cats named Miso and Tofu.",
    "Dora works as a nurse in Porto.",
    "Dora is allergic to peanuts.",
]
QUESTION = "What pets does Dora have?"


def _mem0_search(m: MemoryClient, subject: str, **extra: Any) -> list[dict[str, Any]]:
    return list(m.search(QUESTION, filters={"user_id": subject}, **extra)["results"])


def _context_scores(client: httpx.Client, subject: str) -> dict[int, float]:
    block = client.post("/v1/context", json={"subject": subject, "query": QUESTION, "format": "json"})
    pieces = json.loads(block.text)["memory_context"]["pieces"]
    return {int(p["ids"][0]): float(p["score"]) for p in pieces if p["layer"] == "L2"}


def test_a_memory_scores_the_same_on_every_surface_and_when_more_is_stored(
    api_url: str,
    engine: Engine,
    settings: Settings,
    tenants: dict[str, Tenant],
    subject: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Any,
) -> None:
    monkeypatch.setenv("MEM0_DIR", str(tmp_path / "mem0"))
    tenant = tenants["alpha"]
    client = tenant.client(api_url)
    mem0 = MemoryClient(api_key=tenant.key, host=f"{api_url}/mem0")
    for fact in FACTS:
        mem0.add(fact, user_id=subject, infer=False)
    hits = _mem0_search(mem0, subject)
    assert hits[0]["memory"] == FACTS[0]
    cats, score = int(hits[0]["id"]), float(hits[0]["score"])
    assert 0.5 < score < 1.0

    with engine.connect() as conn:
        native = search(conn, settings, tenant.namespaces[0], QUESTION, subject, layers=("items",), k=5)
    assert (native[0].id, native[0].score) == (cats, score)
    listed = client.post("/v1/memories/search", json={"query": QUESTION, "subject": subject}).json()
    assert (listed["results"][0]["id"], listed["results"][0]["score"]) == (cats, score)
    assert _context_scores(client, subject)[cats] == score

    for i in range(12):  # unrelated memories do not move the score (no per-search scaling)
        mem0.add(f"Dora visited museum {i}.", user_id=subject, infer=False)
    again = _mem0_search(mem0, subject)
    assert (int(again[0]["id"]), float(again[0]["score"])) == (cats, score)

    # threshold: the same cut on the mem0 and the native search
    kept = _mem0_search(mem0, subject, threshold=score)
    assert [int(h["id"]) for h in kept] == [cats]
    assert _mem0_search(mem0, subject, threshold=min(1.0, score + 0.001)) == []
    cut = client.post("/v1/memories/search", json={"query": QUESTION, "subject": subject, "threshold": score})
    assert [h["id"] for h in cut.json()["results"]] == [cats]
