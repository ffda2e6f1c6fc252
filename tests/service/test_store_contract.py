"""LangGraph's PostgresStore contract, as its own test files state it (test_store.py, test_async_store.py,
run whole by test_langgraph_suite.py when a checkout is at hand), ported to StrataflowStore: one vector per
indexed field path and the store's index configuration, namespace prefixes as label boundaries and labels as
PostgresStore takes them, the time to live as a database time, filters and pages, threshold, and threads or
coroutines sharing one store, each against a live server and a namespace of its own."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from langgraph.store.base import InvalidNamespaceError, PutOp
from sqlalchemy import Engine, text

from strataflow.config import Settings
from strataflow.integrations.langgraph import AsyncStrataflowStore, StrataflowStore
from tests.fixtures.service import Tenant, _serve, make_tenant

FERRY = "The ferry to the island leaves from pier nine every morning at seven."
OTHER = "Quarterly tax forms must be filed with the regional revenue office by the accountant."
OTHER2 = "A violin concerto needs careful rehearsal of the slow movement before the concert."
QUERY = "When does the boat to the island depart?"


@pytest.fixture
def tenant(engine: Engine) -> Tenant:
    """An agent key of a namespace no other test writes: an empty store."""
    return make_tenant(engine, "agent", (f"lgc_{uuid.uuid4().hex[:10]}",))


@pytest.fixture(scope="module")
def busy_url(engine: Engine, settings: Settings) -> Iterator[str]:
    """A server whose rate limit a few threads exceed at once (4 requests a second, bursts of 2)."""
    yield from _serve(settings.model_copy(update={"api_rate_per_s": 4.0, "api_rate_burst": 2}))


def scores(store: StrataflowStore, namespace: tuple[str, ...]) -> dict[str, float]:
    return {hit.key: hit.score or 0.0 for hit in store.search(namespace, query=QUERY, limit=20)}


def test_each_indexed_field_path_is_a_vector_of_its_own(api_url: str, tenant: Tenant) -> None:
    plain = StrataflowStore(url=api_url, api_key=tenant.key)
    ns = ("docs", "u1")
    plain.put(ns, "alone", {"a": FERRY}, index=["a"])
    plain.put(ns, "in_a", {"a": FERRY, "b": {"c": OTHER}}, index=["a", "b.c"])
    plain.put(ns, "in_bc", {"a": OTHER2, "b": {"c": FERRY}}, index=["a", "b.c"])
    plain.put(ns, "in_list", {"notes": [OTHER, FERRY]}, index=["notes[*]"])
    plain.put(ns, "noise", {"a": OTHER, "b": {"c": OTHER2}}, index=["a", "b.c"])
    found = scores(plain, ns)
    for key in ("in_a", "in_bc", "in_list"):  # found by one field as well as by that field stored alone
        assert found[key] == pytest.approx(found["alone"], abs=0.02), found
    assert found["noise"] < found["alone"] - 0.3

    configured = StrataflowStore(
        url=api_url, api_key=tenant.key, index={"dims": 64, "embed": lambda texts: [], "fields": ["a", "b.c"]}
    )
    assert configured.index_config is not None and configured.index_config["dims"] == 64  # kept, not called
    ns = ("docs", "u2")
    configured.put(ns, "alone", {"a": FERRY})
    configured.put(ns, "in_bc", {"a": OTHER2, "b": {"c": FERRY}})
    configured.put(ns, "unlisted", {"a": OTHER2, "z": FERRY})  # z is not an index field
    configured.put(ns, "override", {"a": OTHER, "x": FERRY}, index=["x"])
    configured.put(ns, "unindexed", {"a": FERRY}, index=False)
    found = scores(configured, ns)
    assert found["in_bc"] == pytest.approx(found["alone"], abs=0.02)
    assert found["override"] == pytest.approx(found["alone"], abs=0.02)
    assert found["unlisted"] < found["alone"] - 0.3
    listed = configured.search(ns, query=QUERY, limit=20)
    assert listed[-1].key == "unindexed" and listed[-1].score is None  # after the ranked ones, as LangGraph's
    above = {h.key for h in configured.search(ns, query=QUERY, threshold=0.5)}
    assert above == {k for k, v in found.items() if v >= 0.5} and "unindexed" not in above


def test_namespaces_are_labels_and_prefixes_stop_at_their_boundaries(api_url: str, tenant: Tenant) -> None:
    store = StrataflowStore(url=api_url, api_key=tenant.key)
    spaces = [
        ("foo",), ("foo", "child"), ("foobar",), ("user_1", "a%b"), ("users", "alice"), ("users", "alice\n"),
        ("users", "bo/b", "notes"), ("uid", "x", "alice"), ("uid", "y", "malice"),
    ]  # fmt: skip
    for ns in spaces:
        store.put(ns, "k", {"content": f"what {'/'.join(ns)} holds"})
    assert {h.namespace for h in store.search(("foo",), limit=50)} == {("foo",), ("foo", "child")}
    assert {h.namespace for h in store.search((), limit=50)} == set(spaces)
    assert store.get(("users", "alice\n"), "k").value["content"] == "what users/alice\n holds"  # type: ignore[union-attr]
    assert {h.namespace for h in store.search(("users", "alice"))} == {("users", "alice")}
    assert set(store.list_namespaces(suffix=["alice"])) == {("users", "alice"), ("uid", "x", "alice")}
    assert store.list_namespaces(prefix=["uid", "*", "alice"]) == [("uid", "x", "alice")]
    assert store.list_namespaces(prefix=["users"], max_depth=1) == [("users",)]
    assert (
        store.list_namespaces(prefix=["users"], limit=2, offset=1)
        == sorted(store.list_namespaces(prefix=["users"]))[1:3]
    )
    with pytest.raises(InvalidNamespaceError):  # refused as BaseStore refuses it, before any request
        store.put(("a.b",), "k", {"content": "x"})


def test_ttl_is_a_database_time_reads_restart_and_the_next_write_sweeps(
    api_url: str, tenant: Tenant, engine: Engine
) -> None:
    store = StrataflowStore(url=api_url, api_key=tenant.key, ttl_config={"refresh_on_read": True})
    ns = ("memories", "u1")
    store.put(ns, "brief", {"content": "a note that expires"}, ttl=10)
    store.put(ns, "kept", {"content": "a note that stays"})

    def expiry(key: str) -> float | None:
        with engine.connect() as conn:
            return conn.execute(
                text("select extract(epoch from expires_at - now()) from memory_items "
                     "where namespace = :ns and metadata #>> '{langgraph,key}' = :key and status = 'active'"),
                {"ns": tenant.namespace, "key": key},
            ).scalar()  # fmt: skip

    left = expiry("brief")
    assert left is not None and 590 < left <= 600 and expiry("kept") is None
    with engine.begin() as conn:  # five minutes pass
        conn.execute(text("update memory_items set expires_at = expires_at - interval '5 minutes' "
                          "where namespace = :ns"), {"ns": tenant.namespace})  # fmt: skip
    store.get(ns, "brief", refresh_ttl=False)
    assert 290 < (expiry("brief") or 0) <= 300
    store.search(ns, query="note")  # refresh_on_read: the ttl starts again
    assert 590 < (expiry("brief") or 0) <= 600
    with engine.begin() as conn:  # past its time: gone for every read at once, before any sweep
        gone = "update memory_items set expires_at = now() - interval '1 second' where namespace = :ns"
        conn.execute(text(gone + " and expires_at is not null"), {"ns": tenant.namespace})
    assert store.get(ns, "brief") is None
    assert [h.key for h in store.search(ns, query="note")] == ["kept"]
    sweeper = store.start_ttl_sweeper()  # PostgresStore's call: nothing to sweep for reads to be right
    assert sweeper.done() and sweeper.result() is None and store.stop_ttl_sweeper()
    store.put(("other", "u2"), "x", {"content": "a write sweeps the expired"})
    with engine.connect() as conn:
        states = conn.execute(
            text("select status from memory_items "
                 "where namespace = :ns and metadata #>> '{langgraph,key}' = 'brief'"),
            {"ns": tenant.namespace},
        ).scalars().all()  # fmt: skip
    assert states == ["deleted"]  # versioned: its history stays


def test_filters_and_pages_are_answered_by_sql(api_url: str, tenant: Tenant) -> None:
    store = StrataflowStore(url=api_url, api_key=tenant.key)
    ns = ("shop", "u1")
    items = [
        ("apple", {"text": "red apple", "color": "red", "score": 4.5, "tags": ["fruit"], "meta": {"n": 1}}),
        ("car", {"text": "red car", "color": "red", "score": 3.0, "meta": {"n": 2}}),
        ("pear", {"text": "green pear", "color": "green", "score": 4.0}),
        ("boat", {"text": "blue boat", "color": "blue", "score": 3.5, "meta": {"n": 2}}),
    ]
    store.batch([PutOp(ns, key, value) for key, value in items])

    def keys(**kwargs: object) -> set[str]:
        return {h.key for h in store.search(ns, limit=20, **kwargs)}  # type: ignore[arg-type]

    assert keys(filter={"color": "red"}) == {"apple", "car"}
    assert keys(filter={"score": {"$gt": 3.2}}) == {"apple", "pear", "boat"}
    assert keys(filter={"score": {"$gte": 3.5, "$lt": 4.5}}) == {"pear", "boat"}
    assert keys(filter={"color": {"$ne": "red"}}) == {"pear", "boat"}
    assert keys(filter={"color": {"$in": ["green", "blue"]}}) == {"pear", "boat"}
    assert keys(filter={"color": {"$nin": ["green", "blue"]}}) == {"apple", "car"}
    assert keys(filter={"meta.n": 2}) == {"car", "boat"}
    assert keys(filter={"meta.n": {"$ne": 2}}) == {"apple"}  # ne: present and different, as PostgresStore
    assert keys(filter={"tags": ["fruit"]}) == {"apple"}
    assert keys(query="fruit", filter={"color": "red"}) == {"apple", "car"}
    newest = [h.key for h in store.search(ns, limit=20)]
    assert newest == ["boat", "pear", "car", "apple"]
    assert [h.key for h in store.search(ns, limit=2, offset=1)] == newest[1:3]


def test_threads_sharing_one_store_wait_out_the_rate_limit(busy_url: str, tenant: Tenant) -> None:
    store = StrataflowStore(url=busy_url, api_key=tenant.key, concurrency=10)  # all at once: 429s
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            store.put(("load", f"u{t}"), "k", {"content": f"note of thread {t}"})
            store.search(("load", f"u{t}"), query="note")
        except BaseException as exc:  # noqa: BLE001 (the test counts them)
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(10)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and store.retries > 0, (errors, store.retries)  # refused for a moment, then served
    assert len(store.list_namespaces(prefix=["load"])) == 10 and time.monotonic() - started < 120


def test_the_async_store_gathers_its_callers_and_refuses_blocking_its_loop(
    api_url: str, tenant: Tenant
) -> None:
    async def work() -> tuple[int, int]:
        store = AsyncStrataflowStore(url=api_url, api_key=tenant.key)
        await asyncio.gather(
            *(store.aput(("bulk", "u1"), f"k{i}", {"content": f"note {i}"}) for i in range(150))
        )
        found = await asyncio.gather(*(store.aget(("bulk", "u1"), f"k{i}") for i in range(150)))
        with pytest.raises(asyncio.InvalidStateError):
            store.get(("bulk", "u1"), "k1")  # on the loop's own thread: would block it
        elsewhere = await asyncio.to_thread(store.get, ("bulk", "u1"), "k1")
        assert elsewhere is not None and elsewhere.value == {"content": "note 1"}
        await store.aclose()
        return sum(item is not None for item in found), store.requests

    got, requests = asyncio.run(work())
    assert got == 150 and requests <= 5  # 300 calls gathered into a few batches
