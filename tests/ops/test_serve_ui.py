"""`strataflow serve --port N`: the Prefect UI on port N calls the API on port N (not 4200), read through
/ui-settings and through the page itself, drawn by headless Chromium."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path

from strataflow.db import embedded
from strataflow.ops.serve import api_url, server_environment, wait_healthy
from tests.ops.test_report import CHROMIUM_FLAGS, _chromium


def test_the_server_environment_points_the_ui_at_the_served_host_and_port() -> None:
    env = server_environment({"PREFECT_API_URL": "http://elsewhere/api", "HOME": "/h"}, "127.0.0.1", 4311)
    assert "PREFECT_API_URL" not in env and env["HOME"] == "/h"
    assert env["PREFECT_UI_API_URL"] == "http://127.0.0.1:4311/api"
    assert env["PREFECT_UI_URL"] == "http://127.0.0.1:4311"  # the alerts' links to a flow run's page
    assert (env["PREFECT_SERVER_API_HOST"], env["PREFECT_SERVER_API_PORT"]) == ("127.0.0.1", "4311")
    assert api_url(4311, "0.0.0.0") == "http://127.0.0.1:4311/api"
    kept = server_environment({"PREFECT_UI_API_URL": "https://prefect.example/api"}, "0.0.0.0", 4311)
    assert kept["PREFECT_UI_API_URL"] == "https://prefect.example/api"


def test_serve_on_another_port_gives_a_ui_that_lists_the_deployments(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    home = tmp_path / "home"
    env = {**os.environ, "STRATAFLOW_HOME": str(home), "PREFECT_HOME": str(tmp_path / "prefect")}
    for name in ("PREFECT_API_URL", "PREFECT_UI_API_URL", "STRATAFLOW_ALERT_WEBHOOK"):
        env.pop(name, None)
    log = (tmp_path / "serve.log").open("wb")
    serve = subprocess.Popen(
        [sys.executable, "-c", "from strataflow.cli import app; app()", "serve", "--port", str(port)],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        api = f"http://127.0.0.1:{port}/api"
        wait_healthy(api, None, timeout_s=180)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ui-settings", timeout=10) as response:
            settings = json.load(response)
        assert settings["api_url"] == api
        deployments = _wait_for_deployments(api)
        assert "incremental" in deployments
        dom = subprocess.run(
            [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chrome'}",
             "--virtual-time-budget=10000", "--dump-dom", f"http://127.0.0.1:{port}/deployments"],
            capture_output=True, text=True, timeout=180, check=True,
        ).stdout  # fmt: skip
        assert "Oops" not in dom and "Something went wrong" not in dom, dom[-2000:]
        assert "incremental" in dom and "nightly" in dom, "the UI lists the deployments it read from its API"
    finally:
        os.killpg(serve.pid, signal.SIGINT)
        try:
            serve.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
        embedded.stop(home)  # serve leaves the home's PostgreSQL running, as every command does
        log.close()


def _wait_for_deployments(api: str, timeout_s: float = 180) -> list[str]:
    """The deployment names once serve has deployed prefect.yaml (it does so after the server is healthy)."""
    import time

    deadline = time.monotonic() + timeout_s
    names: list[str] = []
    while time.monotonic() < deadline:
        request = urllib.request.Request(
            f"{api}/deployments/filter", data=b"{}", headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            names = [deployment["name"] for deployment in json.load(response)]
        if len(names) >= 6:
            return names
        time.sleep(1)
    raise AssertionError(f"serve deployed only {names} within {timeout_s:.0f} s")
