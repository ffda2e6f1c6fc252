"""mem0's official client (mem0ai 2.2.1, unmodified) against the mem0-compatible surface of the real server
(`/mem0` of the API on 127.0.0.1): MemoryClient and AsyncMemoryClient round trips, an infer=True add whose
event turns SUCCEEDED once the extract stage has read it (a scripted model: a known extraction), filters,
and the tenancy of every route (namespaces, agents, read-only keys)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mem0 import AsyncMemoryClient, MemoryClient
from mem0.exceptions import MemoryError as Mem0Error
from sqlalchemy import Engine

from strataflow.pipeline.extract import extract_new
from tests.fixtures.scripted_model import fact
from tests.fixtures.service import Tenant, make_tenant

TEA = "I prefer green tea over coffee in the morning."


@pytest.fixture(autouse=True)
def quiet_client(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[None]:
    monkeypatch.setenv("MEM0_DIR", str(tmp_path / "mem0"))
    logging.getLogger("mem0").setLevel(logging.CRITICAL + 1)  # it logs every HTTP error it raises
    yield


def client(api_url: str, tenant: Tenant) -> MemoryClient:
    return MemoryClient(api_key=tenant.key, host=f"{api_url}/mem0")


def status_of(call: Any, *args: Any, **kwargs: Any) -> int:
    """The HTTP status of a call the client raises for."""
    with pytest.raises(Mem0Error) as raised:
        call(*args, **kwargs)
    return int((raised.value.debug_info or {})["status_code"])


def test_the_client_round_trips_every_memory_call(
    api_url: str, tenants: dict[str, Tenant], subject: str
) -> None:
    m = client(api_url, tenants["alpha"])
    added = m.add(
        [{"role": "user", "content": TEA}], user_id=subject, infer=False, metadata={"topic": "drinks"}
    )
    assert added["status"] == "SUCCEEDED" and [r["event"] for r in added["results"]] == ["ADD"]
    mid = added["results"][0]["id"]
    again = m.add(TEA, user_id=subject, infer=False)  # the same text: the same memory
    assert [(r["id"], r["event"]) for r in again["results"]] == [(mid, "NONE")]
    got = m.get(mid)
    assert (got["memory"], got["user_id"], got["metadata"]) == (TEA, subject, {"topic": "drinks"})
    hits = m.search("Which hot drink does the user like?", filters={"user_id": subject})["results"]
    assert [h["id"] for h in hits][:1] == [mid] and 0 < hits[0]["score"] <= 1
    assert set(hits[0]) >= {"id", "memory", "score", "user_id", "created_at", "updated_at"}
    m.update(mid, text="I prefer jasmine tea over coffee in the morning.")
    assert "jasmine" in m.get(mid)["memory"]
    history = m.history(mid)
    assert [h["event"] for h in history] == ["ADD", "UPDATE"]
    assert (history[1]["old_memory"], history[1]["new_memory"]) == (TEA, m.get(mid)["memory"])
    page = m.get_all(filters={"user_id": subject}, page=1, page_size=1)
    assert page["count"] == 1 and [r["id"] for r in page["results"]] == [mid] and page["next"] is None
    assert {"type": "user", "name": subject} in [
        {k: e[k] for k in ("type", "name")} for e in m.users()["results"]
    ]
    assert m.delete(mid)["message"]
    assert status_of(m.get, mid) == 404
    assert status_of(m.history, mid) == 404  # deleted for mem0's client (strataflow keeps the versions)


def test_filters_agents_runs_and_what_is_refused(
    api_url: str, tenants: dict[str, Tenant], subject: str
) -> None:
    m = client(api_url, tenants["alpha"])
    mine = m.add("I keep bees on the roof.", user_id=subject, agent_id="gardener", run_id="r1", infer=False)
    shared = m.add("I live near the harbour.", user_id=subject, infer=False)
    bees, harbour = mine["results"][0]["id"], shared["results"][0]["id"]
    query = "What does the user do at home?"
    assert [h["id"] for h in m.search(query, filters={"user_id": subject})["results"]] == [harbour]
    as_agent = m.search(query, filters={"AND": [{"user_id": subject}, {"agent_id": {"in": ["gardener"]}}]})
    assert [(h["id"], h["agent_id"], h["run_id"]) for h in as_agent["results"]] == [(bees, "gardener", "r1")]
    either = m.search(query, filters={"OR": [{"user_id": subject}, {"agent_id": "gardener"}]})
    assert {h["id"] for h in either["results"]} == {bees, harbour}
    run = m.get_all(filters={"user_id": subject, "run_id": {"in": ["r1", "r2"]}, "agent_id": "gardener"})
    assert [r["id"] for r in run["results"]] == [bees]
    assert status_of(m.get, bees) == 404  # another agent's private entry, for a request with no agent
    since = m.search(query, filters={"user_id": subject, "created_at": {"gte": "2024-01-01"}})["results"]
    assert [h["id"] for h in since] == [harbour]
    assert m.search(query, filters={"user_id": subject, "created_at": {"lt": "2024-01-01"}})["results"] == []
    neither = {"AND": [{"user_id": {"ne": subject}}, {"user_id": {"in": [subject, f"{subject}_x"]}}]}
    assert m.get_all(filters=neither)["results"] == []
    for unsupported in ({"user_id": subject, "topic": {"regex": "x"}}, {"NOT": []}, {"user_id": None}):
        assert status_of(m.search, query, filters=unsupported) == 400
    assert m.search(query, filters={"user_id": subject, "app_id": "another_app"})["results"] == []
    raw = httpx.post(
        f"{api_url}/mem0/v3/memories/search/",
        json={"query": query, "filters": {"user_id": subject, "categories": {"like": "x"}}},
        headers={"Authorization": f"Token {tenants['alpha'].key}"},
    )  # fmt: skip
    refused = raw.json()["error"]
    assert (
        raw.status_code == 400 and refused["field"] == "filters.categories" and "'like'" in refused["message"]
    )
    not_a_boolean = httpx.post(  # Schemathesis: Literal[False] took 0 (0 == False)
        f"{api_url}/mem0/v3/memories/add/", json={"messages": "hi", "user_id": subject, "immutable": 0},
        headers={"Authorization": f"Token {tenants['alpha'].key}"},
    )  # fmt: skip
    assert not_a_boolean.status_code == 422 and not_a_boolean.json()["error"]["field"] == "immutable"


def test_infer_true_is_pending_until_extraction_then_found_by_meaning(
    api_url: str, engine: Engine, scripted_model: Any
) -> None:
    tenant = make_tenant(engine, "agent", (f"mem0_{uuid.uuid4().hex[:8]}",))
    scripted_model.says("moved to Lisbon", fact("location", "Lisbon"))
    m, user = client(api_url, tenant), "u_lisbon"
    added = m.add(
        [{"role": "user", "content": "I moved to Lisbon last spring."}], user_id=user, run_id="chat-7",
        metadata={"topic": "home"}, app_id="travel",
    )  # fmt: skip
    assert added["status"] == "PENDING" and added["event_id"]
    event_url = f"{api_url}/mem0/v1/event/{added['event_id']}/"
    headers = {"Authorization": f"Token {tenant.key}"}
    pending = httpx.get(event_url, headers=headers).json()
    assert (pending["status"], pending["results"], pending["payload"]["run_id"]) == ("PENDING", [], "chat-7")
    extract_new(scripted_model.settings, namespace=tenant.namespace, progress=False)
    done = httpx.get(event_url, headers=headers).json()
    said = "I moved to Lisbon last spring."  # an extracted memory reads as its statement, not "Lisbon"
    assert done["status"] == "SUCCEEDED" and [r["memory"] for r in done["results"]] == [said]
    hits = m.search("Where does the user live?", filters={"user_id": user})["results"]
    assert [(h["memory"], h["run_id"]) for h in hits] == [(said, "chat-7")]  # embedded when extracted
    assert (hits[0]["metadata"], hits[0]["app_id"]) == ({"topic": "home"}, "travel")  # the add's, kept
    other = make_tenant(engine, "agent", (f"mem0_{uuid.uuid4().hex[:8]}",))
    assert httpx.get(event_url, headers={"Authorization": f"Token {other.key}"}).status_code == 404


def test_the_async_client(api_url: str, tenants: dict[str, Tenant], subject: str) -> None:
    async def round_trip() -> list[dict[str, Any]]:
        async with AsyncMemoryClient(api_key=tenants["alpha"].key, host=f"{api_url}/mem0") as am:
            await am.add(
                [{"role": "user", "content": "I keep a sourdough starter named Bob."}],
                user_id=subject,
                infer=False,
            )
            found = await am.search("Does the user bake bread?", filters={"user_id": subject})
            return list(found["results"])

    assert ["sourdough" in hit["memory"] for hit in asyncio.run(round_trip())] == [True]


def test_tenancy_namespaces_readers_and_whole_namespace_deletes(
    api_url: str, tenants: dict[str, Tenant], subject: str
) -> None:
    alpha, beta, reader = (client(api_url, tenants[n]) for n in ("alpha", "beta", "reader"))
    with pytest.raises(ValueError):
        MemoryClient(api_key="sf_00000000_not-a-key-at-all-xxxxxxxxxx", host=f"{api_url}/mem0")
    mid = alpha.add("I swim in the sea every morning.", user_id=subject, infer=False)["results"][0]["id"]
    assert beta.search("Does the user swim?", filters={"user_id": subject})["results"] == []
    assert beta.get_all(filters={"user_id": subject})["results"] == []
    assert subject not in [e["name"] for e in beta.users()["results"]]
    assert status_of(beta.get, mid) == 404 and status_of(beta.delete, mid) == 404
    assert status_of(beta.update, mid, text="hacked") == 404
    assert reader.get(mid)["memory"].startswith("I swim")  # an analyst of alpha's namespace reads
    assert status_of(reader.add, "x", user_id=subject, infer=False) == 403
    assert status_of(reader.delete_users, user_id=subject) == 403
    assert status_of(reader.delete_all) == 403
    alpha.add("I swim with my sister.", user_id=subject, agent_id="coach", infer=False)
    alpha.delete_users(user_id=subject)  # a whole-namespace key: every agent's memories of the user
    left = alpha.get_all(filters={"OR": [{"user_id": subject}, {"agent_id": "coach"}]})
    assert left["results"] == []


def test_agent_bound_keys_act_as_their_agent_and_may_not_delete_the_namespace(
    api_url: str, engine: Engine, subject: str
) -> None:
    from strataflow.db import roles
    from strataflow.integrations.langgraph import StrataflowStore, StrataflowStoreError
    from strataflow.service import keys

    role, namespace = f"t_m0_{uuid.uuid4().hex[:8]}", f"m0_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        roles.create_role(conn, role, "agent", with_password=False)
        roles.grant(conn, role, namespace)
        made = {name: keys.create_key(conn, f"{role}-{name}", role, agent_id=agent)[0]
                for name, agent in (("a1", "a1"), ("b1", "b1"), ("all", None))}  # fmt: skip
    a1, b1, every = (MemoryClient(api_key=made[n], host=f"{api_url}/mem0") for n in ("a1", "b1", "all"))
    mid = a1.add("I water the plants on Fridays.", user_id=subject, infer=False)["results"][0]
    assert mid["agent_id"] == "a1"  # an agent key writes its agent's private entry
    assert status_of(a1.add, "x", user_id=subject, agent_id="b1", infer=False) == 403
    assert status_of(a1.search, "plants", filters={"user_id": subject, "agent_id": "b1"}) == 403
    assert [h["id"] for h in a1.search("plants", filters={"user_id": subject})["results"]] == [mid["id"]]
    assert b1.search("plants", filters={"user_id": subject})["results"] == []
    assert status_of(b1.get, mid["id"]) == 404 and status_of(every.get, mid["id"]) == 404
    assert status_of(b1.delete, mid["id"]) == 404
    for refused in (lambda: a1.delete_users(user_id=subject), a1.reset):
        assert status_of(refused) == 403
    assert status_of(a1.delete_all) == 400  # no identity field: refused, whoever asks (mem0's server: 400)
    assert a1.get(mid["id"])["memory"].startswith("I water")
    every.delete_users(user_id=subject)  # the namespace's key: every agent's memories of the user
    assert status_of(a1.get, mid["id"]) == 404
    store = StrataflowStore(url=api_url, api_key=made["a1"], agent="b1")
    with pytest.raises(StrataflowStoreError) as refused_store:
        store.get(("memories", subject), "k")
    assert refused_store.value.status == 403
