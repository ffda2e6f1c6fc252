"""Ordinary sentences added through mem0's own client (mem0ai's MemoryClient, unmodified, infer=True: its
default) become memories after the next extraction with the default settings (offline/rules), in English and
Chinese; a question added the same way becomes none."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from mem0 import MemoryClient
from sqlalchemy import Engine

from strataflow.config import Settings
from strataflow.pipeline.extract import extract_new
from tests.fixtures.service import make_tenant

SAID = {
    "u7f3a9c21": [
        ("I'm living in Trondheim these days.", "trondheim"),
        ("My name is Edda and I work as a midwife.", "midwife"),
        ("We have two kids, Ola and Siri.", "siri"),
        ("I have a cat named Pixel.", "pixel"),
        ("I'm allergic to sesame.", "sesame"),
        ("I can't stand olives.", "olives"),
    ],
    "u0b44e7d9": [
        ("我住在洛阳。", "洛阳"),
        ("我叫周婷，是一名药剂师。", "药剂师"),
        ("我家的猫叫团团。", "团团"),
        ("我对虾过敏。", "虾"),
        ("我不吃羊肉。", "羊肉"),
        ("我最喜欢的运动是乒乓球。", "乒乓球"),
    ],
}
ASKED = ("u7f3a9c21", "Do you know a good dentist in Lyon?")


@pytest.fixture(autouse=True)
def quiet_client(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[None]:
    monkeypatch.setenv("MEM0_DIR", str(tmp_path / "mem0"))
    logging.getLogger("mem0").setLevel(logging.CRITICAL + 1)
    yield


def test_mem0_add_with_infer_gives_memories_for_ordinary_sentences(
    api_url: str, engine: Engine, settings: Settings
) -> None:
    assert settings.extract_model == "offline/rules"  # the default install's model
    tenant = make_tenant(engine, "agent", (f"mem0_{uuid.uuid4().hex[:8]}",))
    m = MemoryClient(api_key=tenant.key, host=f"{api_url}/mem0")
    for user, sentences in SAID.items():
        for text, _ in sentences:
            assert m.add([{"role": "user", "content": text}], user_id=user)["status"] == "PENDING"
    question = m.add([{"role": "user", "content": ASKED[1]}], user_id=ASKED[0], run_id="q")

    extract_new(settings, namespace=tenant.namespace, progress=False)

    for user, sentences in SAID.items():
        memories = [hit["memory"].casefold() for hit in m.get_all(filters={"user_id": user})["results"]]
        missing = [text for text, value in sentences if not any(value in memory for memory in memories)]
        assert not missing, (missing, memories)
    asked = m.get_all(filters={"AND": [{"user_id": ASKED[0]}, {"run_id": "q"}]})["results"]
    assert asked == [] and question["status"] == "PENDING"
