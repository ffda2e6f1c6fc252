"""Durability of online writes (issue 28): `python -m bench.durability [--seconds S] [--clients C]`.

For each setting of STRATAFLOW_API_DURABLE_WRITES (true, the default: synchronous_commit on; false: off for
online writes), on this home's embedded database: starts the real server (`strataflow api`, rate limit off),
streams POST /v1/messages of one new message each from C clients for S seconds, kills the postmaster with
SIGKILL, keeps posting for two seconds (those requests fail), restarts the database (`strataflow db status`
starts it) and counts the acknowledged (2xx) messages that are not in conversation_messages. Before the kill
it measures the write latency and throughput of the running stream.

Keys: `durable` and `async` ({acknowledged, lost, write_p50_ms, write_p95_ms, writes_per_s}); `ratio` =
writes_per_s durable / writes_per_s async (the throughput cost of durability: 1 is none). Prints one JSON
line last. Target: durable.lost == 0.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from bench.api import free_port, make_key, start_server, stop_server
from bench.context import log, percentile

NAMESPACE = "bench_durability"
ROLE = "bench_durability_agent"


def postmaster_pid(home: Path) -> int:
    return int((home / "pg" / "postmaster.pid").read_text().split("\n", 1)[0])


def stream(port: int, key: str, run: str, seconds: float, clients: int, home: Path) -> dict[str, Any]:
    """Post from `clients` threads; kill the postmaster after `seconds`; (acknowledged, latencies, killed)."""
    acked: list[str] = []
    latencies: list[float] = []
    lock, stop = threading.Lock(), threading.Event()
    killed_at = [0.0]

    def client(worker: int) -> None:
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=30) as http:
            i = 0
            while not stop.is_set():
                smid = f"{run}-{worker}-{i}"
                i += 1
                message = {"conversation_id": run, "subject_id": "durability", "source_message_id": smid,
                           "role": "user", "content": f"durability probe {smid}",
                           "created_at": datetime.now(UTC).isoformat()}  # fmt: skip
                started = time.perf_counter()
                try:
                    ok = http.post("/v1/messages", json=message).status_code < 300
                except httpx.HTTPError:
                    ok = False
                took = (time.perf_counter() - started) * 1000
                with lock:
                    if ok:
                        acked.append(smid)
                        if not killed_at[0]:
                            latencies.append(took)
                if not ok:
                    time.sleep(0.05)

    threads = [threading.Thread(target=client, args=(w,)) for w in range(clients)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    before = len(acked)
    os.kill(postmaster_pid(home), signal.SIGKILL)
    killed_at[0] = time.monotonic()
    time.sleep(2)
    stop.set()
    for thread in threads:
        thread.join(60)
    return {"acked": acked, "latencies": latencies, "before": before, "seconds": killed_at[0] - began}


def lost(settings: Any, run: str, acked: list[str]) -> int:
    from sqlalchemy import text

    from strataflow.db.engine import dispose_engines, engine_for

    dispose_engines()
    with engine_for(settings).connect() as conn:
        have = set(
            conn.execute(
                text("select source_message_id from conversation_messages where conversation_id = :c"),
                {"c": run},
            ).scalars()
        )
    return sum(smid not in have for smid in acked)


def measure(settings: Any, key: str, durable: bool, seconds: float, clients: int) -> dict[str, Any]:
    port = free_port()
    server = start_server(port, env={"STRATAFLOW_API_DURABLE_WRITES": str(durable).lower()})
    run = f"dur-{uuid.uuid4().hex[:8]}"
    try:
        found = stream(port, key, run, seconds, clients, settings.home)
    finally:
        stop_server(server)
    subprocess.run([sys.executable, "-m", "strataflow.cli", "db", "status"], capture_output=True, check=True)
    latencies = sorted(found["latencies"])
    return {
        "acknowledged": len(found["acked"]),
        "lost": lost(settings, run, found["acked"]),
        "write_p50_ms": round(percentile(latencies, 50), 2),
        "write_p95_ms": round(percentile(latencies, 95), 2),
        "writes_per_s": round(found["before"] / found["seconds"], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=6.0, help="stream length before the kill")
    parser.add_argument("--clients", type=int, default=4)
    args = parser.parse_args()
    from strataflow.config import load_settings
    from strataflow.db import migrations
    from strataflow.db.engine import engine_for

    settings = load_settings()
    migrations.upgrade(engine_for(settings))
    key = make_key(settings, ROLE, NAMESPACE)
    figures: dict[str, Any] = {}
    for name, durable in (("durable", True), ("async", False)):
        log(f"{name}: streaming for {args.seconds:g} s, then kill -9 of the postmaster")
        figures[name] = measure(settings, key, durable, args.seconds, args.clients)
        log(f"{name}: {figures[name]}")
    rate = figures["async"]["writes_per_s"]
    figures["ratio"] = round(figures["durable"]["writes_per_s"] / rate, 3) if rate else None
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
