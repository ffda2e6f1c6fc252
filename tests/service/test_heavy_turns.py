"""One tenant gets its share of the pool and no more (issue 36 item 1): heavy requests take a turn of their
key, their namespace and the process (Busy past the wait); each fan-out shape sent at once from one key
leaves another namespace's context answering in its usual time, each answered, refused or cut at its time
limit; and save_info asks a slow model with no database connection held."""

from __future__ import annotations

import http.server
import json
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from sqlalchemy import Engine

from strataflow.config import Settings
from strataflow.service.keys import Caller
from strataflow.service.session import Busy, Sessions
from strataflow.service.turns import Limits, Turns, Weight
from tests.fixtures.service import Tenant, _serve
from tests.fixtures.turn_order import TurnOrder


def _caller(key_id: int, namespace: str) -> Caller:
    return Caller(key_id, f"k{key_id}", "r", "agent", (namespace,), namespace)


def _turns(per_key: int = 1, per_namespace: int = 2) -> Turns:
    """The turns of a process with a pool of four: three turns, two of them for heavy work."""
    return Turns(3, {"heavy": Limits(2, per_key, per_namespace), "scan": Limits(3, 2, 3)})


def test_heavy_turns_are_shared_per_key_namespace_and_process(settings: Settings, engine: Engine) -> None:
    small = settings.model_copy(update={"api_heavy_per_key": 1, "api_heavy_per_namespace": 2,
                                        "api_heavy_wait_s": 0.2})  # fmt: skip
    sessions = Sessions(small, engine)

    async def scenario() -> list[str]:
        outcomes: list[str] = []
        held = anyio.Event()

        async def hold(caller: Caller) -> None:
            async with sessions.turn(caller, "heavy", time.monotonic()):
                await held.wait()

        async def attempt(caller: Caller, weight: Weight = "heavy") -> None:
            try:
                async with sessions.turn(caller, weight, time.monotonic()):
                    outcomes.append(f"k{caller.key_id} ran")
            except Busy as busy:
                outcomes.append(f"k{caller.key_id} busy: {busy}")

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(hold, _caller(1, "ns1"))
            await anyio.sleep(0.05)
            await attempt(_caller(1, "ns1"))  # the key's one turn is taken
            tasks.start_soon(hold, _caller(2, "ns1"))  # the namespace's second turn (alone, it may)
            await anyio.sleep(0.05)
            await attempt(_caller(3, "ns1"))  # the namespace's two turns are taken
            await attempt(_caller(4, "ns2"))  # heavy work may hold two of the three turns: none left
            await attempt(_caller(5, "ns3"), "scan")  # a scan always has the third turn
            held.set()
        await attempt(_caller(1, "ns1"))  # all free again
        return outcomes

    outcomes = anyio.run(scenario)
    assert [o.split(":")[0] for o in outcomes] == ["k1 busy", "k3 busy", "k4 busy", "k5 ran", "k1 ran"]
    assert "STRATAFLOW_API_HEAVY_PER_KEY" in outcomes[0]


def test_two_flooding_namespaces_leave_a_third_namespace_a_turn() -> None:
    """R5: three keys in two namespaces, with more requests waiting, hold no more than their namespaces'
    equal parts of the heavy turns: a third namespace is served at once, and a freed turn goes to the waiter
    whose namespace holds the fewest (a fourth namespace before the flooding one)."""
    turns = Turns(4, {"heavy": Limits(3, 1, 2), "scan": Limits(4, 2, 4)})

    async def scenario() -> list[str]:
        heavy = TurnOrder(turns, "heavy")
        order = heavy.order
        async with anyio.create_task_group() as tasks:
            for name, key, namespace in (("b1", "kb1", "B"), ("a1", "ka1", "A"), ("a2", "ka2", "A"),
                                         ("a1 again", "ka1", "A")):  # fmt: skip
                await heavy.start(tasks, name, key, namespace)
            assert order == ["b1", "a1"] and turns.held("heavy") == 2, order  # A keeps to its part
            await heavy.start(tasks, "c1", "kc1", "C")  # a third namespace: served at once
            assert order[-1] == "c1" and turns.held("heavy") == 3, order
            await heavy.start(tasks, "d1", "kd1", "D")  # a fourth waits for the next free turn
            await heavy.release("b1")  # freed: D (holds none) goes before A's second key (A holds one)
            assert order[-1] == "d1", order
            heavy.release_all()
        return order

    order = anyio.run(scenario)
    assert order.index("d1") < order.index("a2") and len(order) == 6, order
    assert not [o for o in order if "timed out" in o], order


@pytest.fixture(scope="module")
def bounded_url(engine: Engine, settings: Settings) -> Iterator[str]:
    """A server with small bounds: one heavy request per key, 2 s of work, 0.5 s of waiting."""
    yield from _serve(settings.model_copy(update={
        "api_rate_per_s": 0.0, "api_heavy_per_key": 1, "api_heavy_max_s": 2.0, "api_heavy_wait_s": 0.5,
    }))  # fmt: skip


def test_fan_out_from_one_key_never_stalls_another_namespace(
    bounded_url: str, tenants: dict[str, Tenant]
) -> None:
    key = tenants["alpha"].key
    users = [f"client_{i}" for i in range(10)]
    agents = [f"agent_{i}" for i in range(10)]
    fan = {"OR": [{"user_id": {"in": users}, "agent_id": {"in": agents}} for _ in range(5)]}
    shapes = [
        ("/mem0/v3/memories/search/", {"query": "where does the client work", "top_k": 100, "filters": fan}),
        ("/mem0/v3/memories/", {"filters": fan, "page_size": 100}),
        (
            "/v1/store/batch",
            {
                "ops": [
                    {"op": "search", "namespace": [], "query": f"garden {i}", "limit": 100}
                    for i in range(200)
                ]
            },
        ),  # fmt: skip
        (
            "/mem0/v3/memories/add/",
            {
                "messages": [{"role": "user", "content": f"note {i}"} for i in range(100)],
                "user_id": "client_0",
                "infer": False,
            },
        ),  # fmt: skip
    ]
    attacks: list[tuple[str, int | str, float]] = []
    probes: list[tuple[int, float]] = []
    done = threading.Event()

    def attack(path: str, body: dict[str, Any]) -> None:
        started = time.monotonic()
        try:
            auth = f"{'Token' if path.startswith('/mem0/') else 'Bearer'} {key}"  # mem0's client says Token
            code: int | str = httpx.post(bounded_url + path, json=body, timeout=60,
                                         headers={"Authorization": auth}).status_code  # fmt: skip
        except httpx.HTTPError as exc:
            code = type(exc).__name__
        attacks.append((path, code, time.monotonic() - started))

    def probe() -> None:
        with tenants["beta"].client(bounded_url) as victim:
            while not done.is_set():
                started = time.monotonic()
                answer = victim.get("/v1/context", params={"subject": "v1", "query": "what city"})
                probes.append((answer.status_code, time.monotonic() - started))
                time.sleep(0.2)

    victim = threading.Thread(target=probe)
    victim.start()
    threads = [threading.Thread(target=attack, args=shape) for shape in shapes * 2]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    done.set()
    victim.join(60)
    assert probes and all(code == 200 and took < 5.0 for code, took in probes), probes
    for path, code, took in attacks:
        assert code in (200, 400, 413, 422, 429), (path, code, took)
        assert code != 200 or took < 10.0, (path, code, took)  # 2 s of work, 0.5 s of waiting, and slack
    # each shape is refused by its schema limit (413/422) or waits its turn (429): none runs unbounded
    assert all(code in (413, 422, 429) or took < 10.0 for _, code, took in attacks), attacks


class _SlowModel(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    delay_s = 3.0

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("content-length", 0)))
        time.sleep(self.delay_s)
        message = {"role": "assistant", "content": '{"items": []}'}
        answer = {
            "id": "x", "object": "chat.completion", "created": int(time.time()), "model": "slow",
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }  # fmt: skip
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture(scope="module")
def slow_model_url(engine: Engine, settings: Settings) -> Iterator[str]:
    model = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SlowModel)
    threading.Thread(target=model.serve_forever, daemon=True).start()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENAI_API_KEY", "sk-test-slow")
        yield from _serve(settings.model_copy(update={
            "api_rate_per_s": 0.0, "extract_model": "openai/slow", "llm_max_retries": 0,
            "llm_api_base": f"http://127.0.0.1:{model.server_address[1]}/v1",
        }))  # fmt: skip
    model.shutdown()


def test_save_info_holds_no_connection_while_the_model_answers(
    slow_model_url: str, engine: Engine, tenants: dict[str, Tenant]
) -> None:
    from strataflow.service.keys import create_key

    with engine.begin() as conn:  # a second key of alpha's role: two keys, two save_info calls each
        second = create_key(conn, f"slow-{uuid.uuid4().hex[:6]}", tenants["alpha"].role)[0]
    answers: list[int] = []

    def save(key: str, index: int) -> None:
        body = {
            "subject": f"slow_{index}_{uuid.uuid4().hex[:6]}",
            "user_message": f"I moved to city {index}.",
        }
        answers.append(httpx.post(f"{slow_model_url}/v1/save_info", json=body, timeout=60,
                                  headers={"Authorization": f"Bearer {key}"}).status_code)  # fmt: skip

    keys = [tenants["alpha"].key, tenants["alpha"].key, second, second]
    threads = [threading.Thread(target=save, args=(key, i)) for i, key in enumerate(keys)]
    for thread in threads:
        thread.start()
    time.sleep(1.5)  # the four calls wait for the model now
    held = engine.pool.checkedout()  # type: ignore[attr-defined]
    started = time.monotonic()
    probe = tenants["beta"].client(slow_model_url).get("/v1/memories", params={"limit": 1})
    took = time.monotonic() - started
    for thread in threads:
        thread.join(60)
    assert held <= 1, f"{held} pooled connections held while the model answered"
    assert probe.status_code == 200 and took < 2.0, took
    assert answers == [200] * 4, answers


def test_a_heavy_requests_deadline_never_reaches_the_connections_next_request(
    bounded_url: str, tenants: dict[str, Tenant]
) -> None:
    with tenants["alpha"].client(bounded_url) as client:  # one keep-alive connection
        for _ in range(3):
            answer = client.post("/v1/memories/search", json={"query": "garden"})
            assert answer.status_code == 200, answer.text
            time.sleep(2.2)  # past the 2 s deadline of the request before


@pytest.fixture
def pool_at_encode(engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The pooled connections checked out at each encode of the process's MiniLM (the real model, which
    the in-process API encodes with); the first entry is the count before the test's request."""
    from strataflow.llm.embeddings import get_embedder

    embedder = get_embedder(settings)
    encode = embedder.encode
    held: list[int] = [engine.pool.checkedout()]  # type: ignore[attr-defined]

    def observed(texts: Any) -> Any:
        held.append(engine.pool.checkedout())  # type: ignore[attr-defined]
        return encode(texts)

    monkeypatch.setattr(embedder, "encode", observed)
    return held


def test_a_mem0_add_embeds_its_messages_before_it_takes_a_connection(
    api_url: str, tenants: dict[str, Tenant], pool_at_encode: list[int]
) -> None:
    tag = uuid.uuid4().hex[:8]
    body = {"messages": [{"role": "user", "content": f"I grow {plant} on the balcony ({tag})."}
                         for plant in ("basil", "mint", "chillies")],  # fmt: skip
            "user_id": f"balcony_{tag}", "infer": False}  # fmt: skip
    answer = httpx.post(f"{api_url}/mem0/v3/memories/add/", json=body, timeout=60,
                        headers={"Authorization": f"Token {tenants['alpha'].key}"})  # fmt: skip
    assert answer.status_code == 200, answer.text
    assert [r["event"] for r in answer.json()["results"]] == ["ADD"] * 3
    before, *held = pool_at_encode
    assert held == [before], f"encoded once, for the three texts, with {held} connections checked out"


def test_a_saved_entry_is_embedded_before_the_request_takes_a_connection(
    api_url: str, tenants: dict[str, Tenant], pool_at_encode: list[int]
) -> None:
    tag = uuid.uuid4().hex[:8]
    entry = {"subject": f"entry_{tag}", "type": "user", "name": f"tea {tag}", "content": f"Tea ({tag})."}
    answer = tenants["alpha"].client(api_url).post("/v1/memories", json=entry)
    assert answer.status_code == 201, answer.text
    before, *held = pool_at_encode
    assert held == [before], f"encoded with {held} connections checked out"
