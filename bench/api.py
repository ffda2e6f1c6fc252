"""The agent service under load (issue 13): `python -m bench.api [--rows N] [--clients C]`.

Loads N L1 messages over 10,000 subjects (default 1,000,000) with bench.context's loader (real ingest, then
embeddings, HNSW, L2 items and L3 reports in namespace `bench_context`), makes an agent role granted that
namespace and an API key for it, starts the real server (`strataflow api --workers W`, rate limit off; W by
default the server's own default: one worker per usable core, each with its share of the cores for torch's
threads, strataflow.service.sizing) in a subprocess, and measures with an HTTP client:

- `context_*_ms`: GET /v1/context for a random subject and question, one client; `inprocess_*_ms`: the same
  calls in this process (strataflow.retrieval.context.build_context in a transaction as the key's role, as
  the server runs it), interleaved with the HTTP calls so both see the same machine load;
  `ratio` = HTTP context p95 / in-process p95;
- `mem0_search_*_ms`: the mem0-compatible search (POST /mem0/v3/memories/search/ with filters={"user_id": S},
  `Authorization: Token KEY`, as mem0's client sends it) for the same subjects and questions, one client:
  the one ranking over the subject's L2 items plus the mem0 shapes;
- `write_*_ms`: POST /v1/messages with one new message, one client (validation, enrichment, key + message
  insert, commit; no embedding);
- `rps_1`, `rps_c`: context requests per second with one client and with C concurrent clients in a steady
  state (each client first asks its share of the questions once, untimed), `p95_c_ms` their p95 under C
  clients; `cores_1` and `cores_c`: the cores each phase kept busy (CPU seconds / wall
  seconds of the API's processes, the database server's and the clients in this process) and the CPU ms of
  one request, all three (what a core more or less would change: cores x 1000 / cpu_ms_per_request bounds
  the rps); `cores_used` is the API's share under C clients (above 1: more than one core works);
- `errors`: responses other than 200 in every phase.

Prints one JSON line last. Targets: ratio <= 1.5, context p95 and mem0_search p95 <= 40 ms (at 1M rows),
write p95 <= 10 ms,
rps_c >= 1.5 x rps_1, errors 0.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx

from bench.context import NAMESPACE, QUESTIONS, TEMPLATES, fill, load, log, percentile
from bench.cpu import postmaster_pid, tree_cpu_s
from strataflow.service.sizing import usable_cores, workers_for

ROLE = "bench_api_agent"


def make_key(settings: Any, role: str = ROLE, namespace: str = NAMESPACE) -> str:
    """An agent role granted the namespace (created once per home) and a new key for it."""
    from strataflow.db import roles
    from strataflow.db.engine import engine_for
    from strataflow.service import keys

    with engine_for(settings).begin() as conn:
        if role not in {r.role_name for r in roles.list_roles(conn)}:
            roles.create_role(conn, role, "agent", with_password=False)
        roles.grant(conn, role, namespace)
        key, _ = keys.create_key(conn, f"{role}-{uuid.uuid4().hex[:8]}", role)
    return key


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(port: int, workers: int = 1, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """`strataflow api --workers W` in a subprocess with its rate limit off (measure the server, not the
    limiter) and the given extra settings, once /readyz answers and every worker has started; W = 0 is the
    server's default (one worker per usable core, strataflow.service.sizing). Its stderr goes to a file: a
    pipe nobody reads would stall a server that logs much (a killed database)."""
    settings = {**os.environ, "STRATAFLOW_API_RATE_PER_S": "0", **(env or {})}
    command = [sys.executable, "-m", "strataflow.cli", "api", "--port", str(port), "--workers", str(workers)]
    workers = workers_for(workers, usable_cores())
    stderr = tempfile.TemporaryFile()
    server = subprocess.Popen(command, env=settings, stdout=subprocess.DEVNULL, stderr=stderr)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if server.poll() is not None:
            stderr.seek(0)
            raise RuntimeError(f"the server exited: {stderr.read().decode(errors='replace')[-2000:]}")
        logged = os.pread(stderr.fileno(), os.fstat(stderr.fileno()).st_size, 0)  # the server's offset stays
        started = logged.count(b"Application startup complete")  # uvicorn logs it once per worker
        try:
            ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=5).status_code == 200
        except httpx.HTTPError:
            ready = False
        if ready and started >= workers:  # every worker serving, not only the first one
            return server
        time.sleep(0.5)
    server.kill()
    raise RuntimeError("the server was not ready within 600 s")


def stop_server(server: subprocess.Popen[bytes]) -> None:
    server.send_signal(signal.SIGTERM)  # graceful: running requests finish
    try:
        server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


class Counter:
    def __init__(self) -> None:
        self.errors = 0
        self.lock = threading.Lock()

    def check(self, response: httpx.Response) -> None:
        if response.status_code != 200:
            with self.lock:
                self.errors += 1
                if self.errors <= 3:
                    log(f"HTTP {response.status_code}: {response.text[:200]}")


def ask_context(client: httpx.Client, counter: Counter, subject: str, query: str) -> float:
    """GET /v1/context for the subject and question; its ms (a response other than 200 is counted)."""
    started = time.perf_counter()
    counter.check(client.get("/v1/context", params={"subject": subject, "query": query}))
    return (time.perf_counter() - started) * 1000


def time_context(
    settings: Any, client: httpx.Client, queries: list[tuple[str, str]], warmup: int, counter: Counter
) -> tuple[list[float], list[float]]:
    """(HTTP ms, in-process ms) of the same context calls, interleaved."""
    from strataflow.db.engine import engine_for
    from strataflow.db.roles import as_role
    from strataflow.retrieval.context import build_context

    engine = engine_for(settings)

    def in_process(subject: str, query: str) -> float:
        started = time.perf_counter()
        with engine.begin() as conn:
            as_role(conn, ROLE)
            build_context(conn, settings, NAMESPACE, subject, query)
        return (time.perf_counter() - started) * 1000

    http_ms, inprocess_ms = [], []
    for n, (subject, query) in enumerate(queries):
        # The first of a pair reads the subject's pages into the database's buffers and the second finds them
        # there (at 1M rows most are not), so the two go first in turn.
        if n % 2 == 0:
            elapsed_http = ask_context(client, counter, subject, query)
            elapsed_inprocess = in_process(subject, query)
        else:
            elapsed_inprocess = in_process(subject, query)
            elapsed_http = ask_context(client, counter, subject, query)
        if n >= warmup:
            http_ms.append(elapsed_http)
            inprocess_ms.append(elapsed_inprocess)
    return http_ms, inprocess_ms


def time_mem0_search(
    url: str, key: str, queries: list[tuple[str, str]], warmup: int, counter: Counter
) -> list[float]:
    """ms of the mem0-compatible search for each (subject, question), as mem0's client calls it."""
    timings = []
    headers = {"Authorization": f"Token {key}"}
    with httpx.Client(base_url=f"{url}/mem0", headers=headers, timeout=120) as client:
        for n, (subject, query) in enumerate(queries):
            body = {"query": query, "filters": {"user_id": subject}, "top_k": 10}
            started = time.perf_counter()
            counter.check(client.post("/v3/memories/search/", json=body))
            if n >= warmup:
                timings.append((time.perf_counter() - started) * 1000)
    return timings


def time_writes(
    client: httpx.Client, scopes: int, rng: random.Random, calls: int, warmup: int, counter: Counter
) -> list[float]:
    timings = []
    for n in range(warmup + calls):
        message = {
            "conversation_id": "live", "subject_id": f"s{rng.randrange(scopes)}",
            "source_message_id": f"api-{uuid.uuid4().hex}", "role": "user",
            "content": fill(rng.choice(TEMPLATES), rng), "created_at": datetime.now(UTC).isoformat(),
        }  # fmt: skip
        started = time.perf_counter()
        counter.check(client.post("/v1/messages", json=message))
        if n >= warmup:
            timings.append((time.perf_counter() - started) * 1000)
    return timings


def throughput(
    url: str,
    key: str,
    queries: list[tuple[str, str]],
    clients: int,
    seconds: float,
    counter: Counter,
    server: subprocess.Popen[bytes],
    postmaster: int | None,
) -> tuple[float, list[float], dict[str, float | None]]:
    """Context requests per second over `seconds` with `clients` threads, every request's ms, and the cores
    the timed window kept busy (meter_stop).

    Each client first asks its share of the questions once on its own connection, untimed: a worker's query
    cache is its own, and which worker a connection lands on is the kernel's choice (SO_REUSEPORT), so
    without it a phase's figure would depend on whether its connections met the workers that served the
    earlier phases. The timed window measures the steady state, where a repeated question is a cache hit
    on whichever worker it reaches."""
    timings: list[float] = []
    window: dict[str, Any] = {}

    def begin() -> None:  # run once, when every client has warmed its share: the window opens for all
        window["before"] = meter_start(server, postmaster)
        window["started"] = time.monotonic()

    ready = threading.Barrier(clients, action=begin)

    failures: list[BaseException] = []

    def worker(offset: int) -> None:
        headers = {"Authorization": f"Bearer {key}"}
        try:
            with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
                share = queries[offset::clients] or queries
                for subject, query in share:
                    ask_context(client, counter, subject, query)
                ready.wait()
                n = 0
                while time.monotonic() < window["started"] + seconds:
                    timings.append(ask_context(client, counter, *share[n % len(share)]))
                    n += 1
        except threading.BrokenBarrierError:
            pass  # another client failed: its error is the one to report
        except Exception as error:  # a client that cannot go on must not leave the others at the barrier
            failures.append(error)
            ready.abort()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise RuntimeError(f"a client of the {clients}-client phase failed: {failures[0]!r}") from failures[0]
    wall = time.monotonic() - window["started"]
    return len(timings) / wall, timings, meter_stop(window["before"], server, postmaster, wall, len(timings))


def meter_start(server: subprocess.Popen[bytes], postmaster: int | None) -> tuple[float, float | None, float]:
    """CPU seconds so far of the API's processes, the database server's and this process (the clients)."""
    return tree_cpu_s(server.pid), _db_cpu(postmaster), time.process_time()


def meter_stop(
    before: tuple[float, float | None, float],
    server: subprocess.Popen[bytes],
    postmaster: int | None,
    wall: float,
    requests: int,
) -> dict[str, float | None]:
    """The cores each part kept busy since `before` (CPU seconds over the window's wall seconds) and the CPU
    ms of one request, all three: cores x 1000 / cpu_ms_per_request bounds the rps any number of cores
    could give."""
    api_before, db_before, client_before = before
    api, client = tree_cpu_s(server.pid) - api_before, time.process_time() - client_before
    db_after = _db_cpu(postmaster)
    db = None if db_before is None or db_after is None else db_after - db_before
    total = api + client + (db or 0.0)
    return {
        "api": round(api / wall, 2),
        "db": None if db is None else round(db / wall, 2),
        "clients": round(client / wall, 2),
        "cpu_ms_per_request": round(total * 1000 / max(requests, 1), 2),
    }


def _db_cpu(postmaster: int | None) -> float | None:
    return None if postmaster is None else tree_cpu_s(postmaster)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="L1 messages to load (default 1,000,000)")
    parser.add_argument("--scopes", type=int, default=10_000, help="subjects the messages spread over")
    parser.add_argument("--clients", type=int, default=8, help="concurrent clients in the throughput phase")
    parser.add_argument("--calls", type=int, default=200, help="timed context calls and writes")
    parser.add_argument(
        "--seconds", type=float, default=30.0,
        help="length of each throughput phase (15 s windows gave 1.62-2.05x at 1M rows, 30 s 1.90-1.99x)",
    )  # fmt: skip
    parser.add_argument(
        "--workers", type=int, default=0, help="server processes (strataflow api --workers; 0: one per core)"
    )
    parser.add_argument(
        "--reuse", action="store_true", help="keep the rows an earlier run loaded in this home"
    )
    args = parser.parse_args(argv)
    from strataflow.config import load_settings
    from strataflow.db import migrations
    from strataflow.db.engine import engine_for
    from strataflow.llm.embeddings import get_embedder
    from strataflow.llm.tokens import count_tokens

    settings = load_settings()
    migrations.upgrade(engine_for(settings))
    rng = random.Random(42)
    scopes = max(1, min(args.scopes, args.rows))
    loaded = load(settings, args.rows, scopes, rng, reuse=args.reuse)
    rng = random.Random(43)  # the timed calls: the same whether the rows were loaded now or before
    key = make_key(settings)
    get_embedder(settings).encode(["warm up the model"])
    count_tokens("warm up the counter")
    port = free_port()
    args.workers = workers_for(args.workers, usable_cores())  # what the server's default makes of it
    log(f"starting the server on port {port} with {args.workers} worker(s)")
    server = start_server(port, args.workers)
    url = f"http://127.0.0.1:{port}"
    counter = Counter()
    queries = [
        (f"s{rng.randrange(scopes)}", fill(rng.choice(QUESTIONS), rng)) for _ in range(args.calls + 20)
    ]
    try:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120) as client:
            http_ms, inprocess_ms = time_context(settings, client, queries, 20, counter)
            write_ms = time_writes(client, scopes, rng, args.calls, 10, counter)
        mem0_ms = time_mem0_search(url, key, queries, 20, counter)
        postmaster = postmaster_pid(engine_for(settings))
        rps_1, _, use_1 = throughput(url, key, queries, 1, args.seconds, counter, server, postmaster)
        rps_c, timings_c, use_c = throughput(
            url, key, queries, args.clients, args.seconds, counter, server, postmaster
        )
    finally:
        stop_server(server)
    context_p95 = percentile(http_ms, 95)
    print(
        json.dumps(
            {
                "rows": args.rows,
                "scopes": scopes,
                "clients": args.clients,
                "workers": args.workers,
                "context_p50_ms": percentile(http_ms, 50),
                "context_p95_ms": context_p95,
                "inprocess_p50_ms": percentile(inprocess_ms, 50),
                "inprocess_p95_ms": percentile(inprocess_ms, 95),
                "ratio": round(context_p95 / max(percentile(inprocess_ms, 95), 1e-9), 3),
                "mem0_search_p50_ms": percentile(mem0_ms, 50),
                "mem0_search_p95_ms": percentile(mem0_ms, 95),
                "write_p50_ms": percentile(write_ms, 50),
                "write_p95_ms": percentile(write_ms, 95),
                "rps_1": round(rps_1, 1),
                "rps_c": round(rps_c, 1),
                "p95_c_ms": percentile(timings_c, 95),
                "cores_used": use_c["api"],
                "cores_1": use_1,
                "cores_c": use_c,
                "errors": counter.errors,
                **loaded,
            }
        )  # fmt: skip
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
