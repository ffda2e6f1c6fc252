"""No delete removes more than it names: every delete path of the drop-ins (mem0's delete_all in each form,
entity deletes, delete by id, the LangGraph store's delete, the native API's) against the live server, each
proving that the other users' memories survive; and mem0's fields that must work (app_id, metadata
versions, an update to a deleted memory's text)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mem0 import MemoryClient
from mem0.exceptions import MemoryError as Mem0Error

from strataflow.integrations.langgraph import StrataflowStore
from tests.fixtures.service import Tenant


@pytest.fixture(autouse=True)
def quiet_client(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[None]:
    monkeypatch.setenv("MEM0_DIR", str(tmp_path / "mem0"))
    logging.getLogger("mem0").setLevel(logging.CRITICAL + 1)
    yield


def texts(m: MemoryClient, user: str) -> list[str]:
    return sorted(str(x["memory"]) for x in m.get_all(filters={"user_id": user})["results"])


@pytest.fixture
def people(api_url: str, tenants: dict[str, Tenant], subject: str) -> tuple[MemoryClient, dict[str, str]]:
    m = MemoryClient(api_key=tenants["alpha"].key, host=f"{api_url}/mem0")
    users = {name: f"{subject}_{name}" for name in ("carol", "alex", "bob")}
    m.add("Carol plays the cello.", user_id=users["carol"], run_id="r1", app_id="music", infer=False)
    m.add("Carol lives in Ghent.", user_id=users["carol"], infer=False)
    m.add("Alex is vegetarian.", user_id=users["alex"], run_id="r1", app_id="music", infer=False)
    m.add("Bob collects vinyl records.", user_id=users["bob"], infer=False)
    return m, users


def raw(api_url: str, tenant: Tenant) -> httpx.Client:
    return httpx.Client(base_url=f"{api_url}/mem0", headers={"Authorization": f"Token {tenant.key}"})


def test_delete_all_deletes_the_intersection_it_names_or_is_refused(
    api_url: str, tenants: dict[str, Tenant], people: tuple[MemoryClient, dict[str, str]]
) -> None:
    m, users = people
    others = {u: texts(m, users[u]) for u in ("alex", "bob")}
    http = raw(api_url, tenants["alpha"])
    refused = http.delete("/v1/memories/", params={"userid": users["carol"]})  # misspelled
    assert refused.status_code == 400 and "userid" in refused.json()["error"]["message"]
    twice = [("user_id", users["carol"]), ("run_id", "r2"), ("run_id", "r1")]  # no last-one-wins
    refused = http.delete("/v1/memories/", params=twice)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "repeated_field"
    unscoped = http.delete("/v1/memories/")  # no identity field: refused as mem0's server refuses it
    assert unscoped.status_code == 400 and unscoped.json()["error"]["code"] == "scope_required"
    assert len(texts(m, users["carol"])) == 2
    # run r1 AND app music AND user carol: the cello only, not Alex's memory of the same run and app
    m.delete_all(filters={"user_id": users["carol"]}, run_id="r1", app_id="music")
    assert texts(m, users["carol"]) == ["Carol lives in Ghent."]
    assert {u: texts(m, users[u]) for u in ("alex", "bob")} == others
    m.delete_all(filters={"user_id": users["carol"]})  # the 2.2.1 client: a query parameter holding a dict
    assert texts(m, users["carol"]) == [] and {u: texts(m, users[u]) for u in ("alex", "bob")} == others
    m.delete_all(app_id="music")
    assert texts(m, users["alex"]) == [] and texts(m, users["bob"]) == others["bob"]


def test_entity_id_store_and_native_deletes_leave_other_users_alone(
    api_url: str, tenants: dict[str, Tenant], people: tuple[MemoryClient, dict[str, str]], subject: str
) -> None:
    m, users = people
    m.delete_users(user_id=users["carol"])
    assert texts(m, users["carol"]) == [] and len(texts(m, users["alex"])) == 1 and texts(m, users["bob"])
    m.delete_users(app_id="music")  # an app entity: the memories added for that app
    assert texts(m, users["alex"]) == [] and texts(m, users["bob"]) == ["Bob collects vinyl records."]
    mine = m.add("Bob sings in a choir.", user_id=users["bob"], infer=False)["results"][0]["id"]
    m.delete(mine)
    assert texts(m, users["bob"]) == ["Bob collects vinyl records."]
    store = StrataflowStore(url=api_url, api_key=tenants["alpha"].key)
    for user in ("u1", "u2"):
        store.put(("memories", f"{subject}_{user}"), "k", {"content": f"{user} likes tea"})
    store.delete(("memories", f"{subject}_u1"), "k")
    assert store.get(("memories", f"{subject}_u1"), "k") is None
    assert store.get(("memories", f"{subject}_u2"), "k") is not None
    native = httpx.Client(base_url=api_url, headers={"Authorization": f"Bearer {tenants['alpha'].key}"})
    bob = m.get_all(filters={"user_id": users["bob"]})["results"][0]["id"]
    assert native.delete(f"/v1/memories/{bob}", params={"user": "x"}).status_code == 400  # unknown: refused
    assert native.delete(f"/v1/memories/{bob}").status_code == 200
    assert texts(m, users["bob"]) == [] and store.get(("memories", f"{subject}_u2"), "k") is not None


def test_metadata_versions_app_ids_and_an_update_to_a_deleted_text(
    api_url: str, tenants: dict[str, Tenant], subject: str
) -> None:
    m = MemoryClient(api_key=tenants["alpha"].key, host=f"{api_url}/mem0")
    added = m.add("Alex avoids dairy.", user_id=subject, infer=False, metadata={"topic": "diet"})
    mid = added["results"][0]["id"]
    m.update(mid, metadata={"topic": "health"})
    assert m.get(mid)["metadata"] == {"topic": "health"}
    assert [h["metadata"] for h in m.history(mid)] == [{"topic": "diet"}, {"topic": "health"}]
    found = m.get_all(filters={"user_id": subject, "metadata": {"topic": {"in": ["health", "x"]}}})
    assert [r["id"] for r in found["results"]] == [mid]
    assert m.get_all(filters={"user_id": subject, "metadata": {"topic": "diet"}})["results"] == []
    old = m.add("Alex swims at dawn.", user_id=subject, infer=False)["results"][0]["id"]
    m.delete(old)
    m.update(mid, text="Alex swims at dawn.")  # a deleted memory said it: unique among live ones only
    assert m.get(mid)["memory"] == "Alex swims at dawn."
    other = m.add("Alex runs.", user_id=subject, infer=False)["results"][0]["id"]
    with pytest.raises(Mem0Error) as taken:
        m.update(other, text="Alex swims at dawn.")
    message = str(taken.value)
    assert f"/mem0/v1/memories/{mid}/" in message
    answer = raw(api_url, tenants["alpha"]).get(f"/v1/memories/{mid}/")
    assert answer.status_code == 200  # the URL the 409 names answers
    app = m.add("Alex likes jazz.", user_id=subject, app_id="radio", infer=False)["results"][0]["id"]
    rows = m.get_all(filters={"app_id": "radio"})["results"]
    assert [(r["id"], r["app_id"]) for r in rows] == [(app, "radio")]
    hits = m.search("music", filters={"user_id": subject, "app_id": "radio"})["results"]
    assert [h["id"] for h in hits] == [app]


def test_work_per_request_is_bounded_before_it_starts(
    api_url: str, tenants: dict[str, Tenant], subject: str
) -> None:
    http = raw(api_url, tenants["alpha"])
    agents = {"in": ["a", "b", "c", "d", "e", "f"]}
    fan_out = {"OR": [{"user_id": {"in": [f"u{i}" for i in range(10)]}, "agent_id": agents}]}
    answer = http.post("/v3/memories/search/", json={"query": "x", "filters": fan_out})
    assert answer.status_code == 200  # one search, whatever the combinations: the filter is its SQL
    wide = {"OR": [{"user_id": f"u{i}"} for i in range(6)]}
    answer = http.post("/v3/memories/search/", json={"query": "x", "filters": wide})
    assert answer.status_code == 422 and "at most 5 filters" in answer.json()["error"]["message"]
    deep = {"OR": [{"AND": [{"user_id": "u1"}]}]}  # lists of filters do not nest (the schema says so)
    answer = http.post("/v3/memories/search/", json={"query": "x", "filters": deep})
    assert answer.status_code == 422 and answer.json()["error"]["field"] == "filters.OR[0].AND[0]"
    long = {"user_id": {"in": [f"u{i}" for i in range(101)]}}
    answer = http.post("/v3/memories/", json={"filters": long})
    assert answer.status_code == 422 and "at most 100" in answer.json()["error"]["message"]
    many = [{"role": "user", "content": f"fact {i}"} for i in range(21)]
    answer = http.post("/v3/memories/add/", json={"messages": many, "user_id": subject, "infer": False})
    assert answer.status_code == 413 and "at most 20" in answer.json()["error"]["message"]
    searches = [{"op": "search", "namespace": ["memories"], "query": "x"}] * 21
    store = httpx.post(
        f"{api_url}/v1/store/batch", json={"ops": searches},
        headers={"Authorization": f"Bearer {tenants['alpha'].key}"},
    )  # fmt: skip
    assert store.status_code == 422 and "at most 20" in store.json()["error"]["message"]


def test_get_all_counts_and_pages_in_sql_with_any_filter(
    api_url: str, tenants: dict[str, Tenant], subject: str
) -> None:
    m = MemoryClient(api_key=tenants["alpha"].key, host=f"{api_url}/mem0")
    for i in range(5):
        m.add(f"Dana note {i}.", user_id=f"{subject}_d", infer=False, metadata={"n": i % 2})
    m.add("Eve note.", user_id=f"{subject}_e", agent_id="scribe", run_id="r9", infer=False)
    either = {
        "OR": [{"user_id": f"{subject}_d", "metadata": {"n": 1}}, {"agent_id": "scribe", "run_id": "r9"}]
    }
    pages = [m.get_all(filters=either, page=n, page_size=2) for n in (1, 2)]
    assert [p["count"] for p in pages] == [3, 3] and pages[0]["next"] and pages[1]["next"] is None
    shown = [r["memory"] for p in pages for r in p["results"]]
    assert shown == ["Eve note.", "Dana note 3.", "Dana note 1."]  # newest first, across pages


def test_get_all_with_an_empty_or_and_a_far_page(api_url: str, tenants: dict[str, Tenant]) -> None:
    """Found by Schemathesis: an empty OR made an empty SQL condition (500), a huge page an offset SQL
    could not hold (422 for a schema-valid body): refused as mem0 OSS refuses it, and a bounded page."""
    http = raw(api_url, tenants["alpha"])
    empty = http.post("/v3/memories/", json={"filters": {"OR": []}})
    assert empty.status_code == 400 and empty.json()["error"]["field"] == "filters.OR"
    far = http.post("/v3/memories/", json={"page": 10**30})
    assert far.status_code == 422 and far.json()["error"]["field"] == "page"
