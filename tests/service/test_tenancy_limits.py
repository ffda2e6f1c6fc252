"""Limits that hold (issue 28 items 1 and 10), on real uvicorn servers: the rate limit answers before any
database work (a server whose database is down still says 429, not 503, past the burst), also for requests
with no or a made-up key (per client address), for the server as a whole (two processes share one bucket
file); a connection that does not send its request head in time is closed and connections over the cap are
refused; and one key's burst of save_info calls never stalls another namespace."""

from __future__ import annotations

import multiprocessing
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from pydantic import SecretStr

from strataflow.config import Settings
from strataflow.service.ratelimit import SharedBuckets
from strataflow.service.server import ConnectionLimits, GuardedH11Protocol
from tests.fixtures.service import Tenant


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(config: uvicorn.Config) -> Iterator[str]:
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 300
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.1)
    yield f"http://{config.host}:{config.port}"
    server.should_exit = True
    thread.join(60)


@pytest.fixture(scope="module")
def dead_db_url(settings: Settings) -> Iterator[str]:
    """The app with a database that refuses every connection, and a rate limit of 2 at once, 1 every 4 s (a
    refused connection can take a second on a busy machine: the bucket must not refill within the test)."""
    from strataflow.service.app import create_app

    down = settings.model_copy(update={
        "database_url": SecretStr(f"postgresql://nobody:pw@127.0.0.1:{_port()}/none"),
        "api_rate_per_s": 0.25, "api_rate_burst": 2,
    })  # fmt: skip
    yield from _run(uvicorn.Config(create_app(down), host="127.0.0.1", port=_port(), log_level="warning"))


@pytest.mark.parametrize("auth", [None, "Bearer sf_0badc0de_" + "y" * 43, "Bearer not-a-key"])
def test_the_rate_limit_answers_before_any_database_work(dead_db_url: str, auth: str | None) -> None:
    time.sleep(8.5)  # the address bucket of the parameter before refills
    headers = {"Authorization": auth} if auth else {}
    statuses = [httpx.get(f"{dead_db_url}/v1/memories", headers=headers).status_code for _ in range(5)]
    assert statuses[:2] == [503, 503] and statuses[2:] == [429, 429, 429], statuses
    limited = httpx.get(f"{dead_db_url}/v1/memories", headers=headers)
    assert int(limited.headers["retry-after"]) >= 1 and limited.json()["error"]["code"] == "rate_limited"


def _take(path: str, count: int, results: multiprocessing.Queue[int]) -> None:
    buckets = SharedBuckets(Path(path), rate_per_s=0.01, burst=5)
    results.put(sum(buckets.take("key:sf_00000000") == 0 for _ in range(count)))


def test_the_buckets_hold_for_the_server_as_a_whole(tmp_path: Path) -> None:
    """Two worker processes share the bucket file: together they get the burst once, not twice."""
    path = str(tmp_path / "api.rate")
    context = multiprocessing.get_context("spawn")
    results: multiprocessing.Queue[int] = context.Queue()
    workers = [context.Process(target=_take, args=(path, 5, results)) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert sorted(results.get(timeout=10) for _ in workers) in ([0, 5], [1, 4], [2, 3])
    other = SharedBuckets(Path(path), rate_per_s=0.01, burst=5)
    assert other.take("key:sf_11111111") == 0 and other.take("key:sf_00000000") > 0


@pytest.fixture
def guarded_url() -> Iterator[str]:
    """A real uvicorn server with the service's protocol: 1 s to send a request head, 3 connections."""

    async def app(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
            await send({"type": "http.response.body", "body": b"ok"})  # type: ignore[operator]

    before = GuardedH11Protocol.limits
    GuardedH11Protocol.configure(ConnectionLimits(header_timeout_s=1.0, max_connections=3))
    config = uvicorn.Config(app, host="127.0.0.1", port=_port(), log_level="warning", http=GuardedH11Protocol,
                            lifespan="off")  # fmt: skip
    yield from _run(config)
    GuardedH11Protocol.configure(before)


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def test_a_slow_request_head_is_cut_and_connections_are_capped(guarded_url: str) -> None:
    slow = _connect(guarded_url)
    slow.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")  # never finishes its headers
    time.sleep(2.5)
    assert slow.recv(100) == b""  # closed by the server
    slow.close()
    idle = [_connect(guarded_url) for _ in range(3)]
    refused = _connect(guarded_url)
    answer = b""
    while chunk := refused.recv(4096):  # the server answers and closes
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 503") and b"too many open connections" in answer
    for sock in (*idle, refused):
        sock.close()
    time.sleep(0.3)
    assert httpx.get(guarded_url).text == "ok"  # a normal request after the idle ones went


def test_one_keys_burst_of_save_info_never_stalls_another_namespace(
    api_url: str, tenants: dict[str, Tenant]
) -> None:
    count, tag = 12, uuid.uuid4().hex[:6]
    gate = threading.Barrier(count + 1)
    answers: list[int | str] = [0] * count

    def save(index: int) -> None:
        with tenants["alpha"].client(api_url) as client:
            gate.wait(60)
            said = f"I am {21 + index} years old and I work as a nurse in Porto ({tag})."
            body = {"subject": f"conc_{index}_{tag}", "user_message": said}
            try:
                answers[index] = client.post("/v1/save_info", json=body).status_code
            except httpx.HTTPError as exc:
                answers[index] = type(exc).__name__

    threads = [threading.Thread(target=save, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    gate.wait(60)
    time.sleep(0.3)
    started = time.monotonic()
    probe = tenants["beta"].client(api_url).get("/v1/memories", params={"limit": 1})
    took = time.monotonic() - started
    for thread in threads:
        thread.join(180)
    assert probe.status_code == 200 and took < 5.0, took
    assert answers == [200] * count, answers
