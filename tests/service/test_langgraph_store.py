"""strataflow.integrations.langgraph against the live server: the store used directly (sync and async), by a
compiled LangGraph StateGraph across two invocations, and by LangMem's memory tools invoked directly; the
key's namespace isolates it."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime
from typing import Any, TypedDict

import httpx
import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, Item
from langmem import create_manage_memory_tool, create_search_memory_tool

from strataflow.integrations.langgraph import (
    AsyncStrataflowStore,
    StrataflowStore,
    StrataflowStoreError,
    generate_store,
)
from tests.fixtures.service import Tenant


def test_put_get_search_filter_list_and_delete(
    api_url: str, tenants: dict[str, Tenant], subject: str
) -> None:
    store = StrataflowStore(url=api_url, api_key=tenants["alpha"].key)
    ns = ("memories", subject)
    store.put(ns, "k1", {"content": "prefers tea over coffee", "rank": 1})
    store.put(ns, "k2", {"content": "works as a backend developer in Berlin", "rank": 2})
    store.put((*ns, "work"), "k3", {"content": "is training for a marathon in October", "rank": 3})
    item = store.get(ns, "k1")
    assert isinstance(item, Item) and item.value == {"content": "prefers tea over coffee", "rank": 1}
    assert (item.namespace, item.key, isinstance(item.created_at, datetime)) == (ns, "k1", True)
    assert store.get(ns, "missing") is None and store.get((*ns, "work"), "k1") is None
    assert sorted(hit.key for hit in store.search(ns)) == ["k1", "k2", "k3"]  # the prefix covers ns/work
    assert [hit.key for hit in store.search((*ns, "work"))] == ["k3"]
    ranked = store.search(ns, query="what does the user drink?")
    assert ranked[0].key == "k1" and 0 < (ranked[0].score or 0) <= 1  # embedded when put
    assert [h.key for h in store.search(ns, filter={"rank": {"$gte": 2}}, query="job")] in (
        ["k2", "k3"],
        ["k3", "k2"],
    )
    assert [h.key for h in store.search(ns, filter={"rank": 2})] == ["k2"]
    assert store.search(ns, filter={"": 2}) == []  # a key the schema allows: no field, no item, no 422
    listed = [h.key for h in store.search(ns)]
    assert [h.key for h in store.search(ns, limit=1, offset=1)] == listed[1:2]
    assert store.search(ns, query="job", offset=999, limit=5) == []  # past the ranking's 1000: no 422
    assert len(store.search(ns, query="job", offset=1, limit=1000)) == 2
    spaces = store.list_namespaces(prefix=("memories", subject))
    assert spaces == [ns, (*ns, "work")]
    assert store.list_namespaces(prefix=("memories", subject), max_depth=2) == [ns]
    assert (*ns, "work") in store.list_namespaces(suffix=("work",))
    store.put(ns, "k1", {"content": "prefers green tea", "rank": 1})
    changed = store.get(ns, "k1")
    assert changed is not None and changed.value["content"] == "prefers green tea"
    store.delete(ns, "k1")
    assert store.get(ns, "k1") is None
    assert "k1" not in [h.key for h in store.search(ns, query="tea")]
    store.put((subject,), "k9", {"content": "a namespace of one label: the label is the user"})
    assert [h.key for h in store.search((subject,))] == ["k9"]


def test_isolation_by_the_key(api_url: str, tenants: dict[str, Tenant], subject: str) -> None:
    mine = StrataflowStore(url=api_url, api_key=tenants["alpha"].key)
    other = StrataflowStore(url=api_url, api_key=tenants["beta"].key)
    reader = StrataflowStore(url=api_url, api_key=tenants["reader"].key)
    mine.put(("memories", subject), "secret", {"content": "the door code is 4711"})
    assert other.get(("memories", subject), "secret") is None
    assert other.search(("memories", subject), query="door code") == []
    assert ("memories", subject) not in other.list_namespaces()
    assert reader.get(("memories", subject), "secret") is not None  # an analyst of the namespace reads
    with pytest.raises(StrataflowStoreError) as refused:
        reader.put(("memories", subject), "x", {"content": "y"})
    assert refused.value.status == 403


class State(TypedDict, total=False):
    user: str
    note: str
    recalled: str


def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
    if state.get("note"):
        store.put(("memories", state["user"]), "graph-note", {"content": state["note"]})
    item = store.get(("memories", state["user"]), "graph-note")
    return {"recalled": item.value["content"] if item else ""}


def test_a_compiled_graph_writes_and_reads_across_invocations(
    api_url: str, tenants: dict[str, Tenant], subject: str
) -> None:
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    key = tenants["alpha"].key
    first = builder.compile(store=StrataflowStore(url=api_url, api_key=key))
    assert first.invoke({"user": subject, "note": "likes sailing"})["recalled"] == "likes sailing"
    second = builder.compile(store=StrataflowStore(url=api_url, api_key=key))
    assert second.invoke({"user": subject})["recalled"] == "likes sailing"


def test_langmem_tools_invoked_directly(api_url: str, tenants: dict[str, Tenant], subject: str) -> None:
    store = StrataflowStore(url=api_url, api_key=tenants["alpha"].key)
    namespace = ("memories", "{langgraph_user_id}")
    manage = create_manage_memory_tool(namespace=namespace, store=store)
    search = create_search_memory_tool(namespace=namespace, store=store)
    config = {"configurable": {"langgraph_user_id": subject}}
    said = manage.invoke({"content": "The user's favourite city is Kyoto"}, config=config)
    assert str(said).startswith("created memory")
    key = str(said).split()[-1]
    found = json.loads(search.invoke({"query": "Which city does the user like most?"}, config=config))
    assert found[0]["key"] == key and "Kyoto" in found[0]["value"]["content"]
    manage.invoke(
        {"content": "The user's favourite city is Osaka", "action": "update", "id": key}, config=config
    )
    updated = store.get(("memories", subject), key)
    assert updated is not None and updated.value == {"content": "The user's favourite city is Osaka"}
    manage.invoke({"action": "delete", "id": key}, config=config)
    assert store.get(("memories", subject), key) is None


def test_the_async_store_and_generate_store(
    api_url: str, tenants: dict[str, Tenant], subject: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STRATAFLOW_API_URL", api_url)
    monkeypatch.setenv("STRATAFLOW_API_KEY", tenants["alpha"].key)

    async def round_trip() -> list[str]:
        astore = AsyncStrataflowStore(url=api_url, api_key=tenants["alpha"].key)
        await astore.aput(("memories", subject), "a1", {"content": "allergic to peanuts"})
        await astore.aput(("memories", subject), "a2", {"content": "plays the cello in an orchestra"})
        await astore.aclose()
        async with generate_store() as store:
            hits = await store.asearch(("memories", subject), query="does the user have food allergies?")
            assert ("memories", subject) in await store.alist_namespaces(prefix=("memories",))
        return [hit.key for hit in hits]

    assert asyncio.run(round_trip())[0] == "a1"


def test_an_empty_suffix_or_prefix_matches_every_namespace_and_odd_ids_are_not_found(
    api_url: str, tenants: dict[str, Tenant], subject: str
) -> None:
    """Found by Schemathesis: an empty suffix path compared the whole namespace (a 422), and a memory id of
    Unicode digits ('³' passes str.isdigit) reached int()."""
    import httpx

    key = tenants["alpha"].key
    store = StrataflowStore(url=api_url, api_key=key)
    store.put(("memories", subject), "k", {"content": "likes rainy days"})
    every = store.list_namespaces()
    assert ("memories", subject) in every
    body = {"ops": [{"op": "list_namespaces", "match_conditions": [{"path": [], "match_type": "suffix"}]}]}
    answer = httpx.post(f"{api_url}/v1/store/batch", json=body, headers={"Authorization": f"Bearer {key}"})
    assert answer.status_code == 200, answer.text
    assert ["memories", subject] in answer.json()["results"][0]
    odd = httpx.get(f"{api_url}/mem0/v1/memories/%C2%B3/", headers={"Authorization": f"Token {key}"})
    assert odd.status_code == 404, odd.text


def test_postgres_store_contract_keys_ttl_index_and_one_request_batches(
    api_url: str, tenants: dict[str, Tenant], subject: str
) -> None:
    """LangGraph's PostgresStore contract: opaque keys ("/" is not a deeper namespace, long keys round-trip),
    index=False is not ranked by meaning, ttl in minutes expires at read time, a batch is one request."""
    import time

    from langgraph.store.base import PutOp

    store = StrataflowStore(url=api_url, api_key=tenants["alpha"].key)
    ns = ("memories", subject)
    store.put(ns, "prefs/x", {"content": "flat key with a slash"})
    store.put((*ns, "prefs"), "x", {"content": "deeper namespace"})
    flat, deep = store.get(ns, "prefs/x"), store.get((*ns, "prefs"), "x")
    assert flat is not None and flat.value["content"] == "flat key with a slash"
    assert deep is not None and deep.value["content"] == "deeper namespace"
    long = "k/" * 1000
    store.put(ns, long, {"content": "long key"})
    found = store.get(ns, long)
    assert found is not None and found.key == long
    store.put(ns, "vault", {"content": "the vault code is hidden under the blue lamp"}, index=False)
    hits = store.search(ns, query="where is the vault code hidden?", limit=50)
    assert [h.score for h in hits if h.key == "vault"] == [None]  # listed after the ranked ones, no score
    assert hits[-1].key == "vault"
    store.put(ns, "brief", {"content": "expires soon"}, ttl=0.05)  # minutes: 3 s
    assert store.get(ns, "brief") is not None
    time.sleep(4)
    assert store.get(ns, "brief") is None and "brief" not in [h.key for h in store.search(ns, limit=50)]
    sent: list[str] = []
    store._client = httpx.Client(
        base_url=store.url,
        headers=store.headers,
        timeout=120,
        event_hooks={"request": [lambda r: sent.append(r.url.path)]},
    )
    ops = [PutOp(namespace=(*ns, "bulk"), key=f"k{i}", value={"content": f"note {i}"}) for i in range(250)]
    store.batch(ops)
    assert sent == ["/v1/store/batch"] and len(store.search((*ns, "bulk"), limit=1000)) == 250
