"""prefect.yaml end to end: a real `prefect server start`, the work pool, `prefect deploy --all`, a backfill
deployment run with parameters, picked up by `prefect worker start --run-once`. Slow (about a minute)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from strataflow.ops.serve import PROJECT_ROOT, api_url, bootstrap, prefect_command, wait_healthy

POOL = "strataflow-pool"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def prefect_server(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A `prefect server start` of its own (own PREFECT_HOME); yields the environment that talks to it."""
    port = _free_port()
    env = {key: value for key, value in os.environ.items() if key != "PREFECT_API_URL"}
    env["PREFECT_HOME"] = str(tmp_path / "prefect-server")
    log = (tmp_path / "server.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        wait_healthy(api_url(port), server, timeout_s=180)
        yield {**env, "PREFECT_API_URL": api_url(port), "PWD": str(PROJECT_ROOT)}
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


def test_a_backfill_deployment_run_through_a_worker_fills_the_tables(
    prefect_server: dict[str, str],
    engine: Any,
    namespace: str,
    tmp_path: Path,
    write_daily_logs: Any,
    layers: Any,
) -> None:
    env = prefect_server
    files = write_daily_logs(tmp_path / "logs", tag=namespace)
    bootstrap(env, POOL, llm_limit=2)  # work pool, the `llm` limit, prefect --no-prompt deploy --all
    deployments = prefect_command(["deployment", "ls"], env).stdout
    for name in ("nightly/nightly", "weekly/weekly", "assets/assets", "backfill/backfill"):
        assert name in deployments

    params = {
        "start": files[0].stem.removeprefix("chat-"),
        "end": files[-1].stem.removeprefix("chat-"),
        "paths": [str(tmp_path / "logs")],
        "namespace": namespace,
        "stages": ["ingest", "extract", "rollup"],  # no embedding: the worker's run skips loading the model
    }
    prefect_command(
        ["deployment", "run", "backfill/backfill", "--param", f"params={json.dumps(params)}"], env
    )
    worker = subprocess.run(
        [sys.executable, "-m", "prefect", "worker", "start", "--pool", POOL, "--run-once"],
        env=env,
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert worker.returncode == 0, worker.stderr[-2000:]

    counts = layers(namespace)
    assert counts["l1"] == 9 and counts["l2"] > 0 and counts["l3"] == 4, (counts, worker.stderr[-2000:])
