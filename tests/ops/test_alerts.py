"""Alerts through a Prefect automation on a real Prefect server (triggers and event persister on, started
with the environment `strataflow serve` gives its server): a failed strataflow flow run and a
completed_with_errors event reach a local webhook with the link to the flow run's page and the failed scopes
their errors name; late scheduled runs alert once per flow, not once per run."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from models.params import RunCounts, RunSummary
from strataflow.ops import alerts
from strataflow.ops.serve import server_environment, wait_healthy
from strataflow.pipeline.runs import scope_ref


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A local receiver: (its URL, the JSON bodies POSTed to it so far)."""
    received: list[dict[str, Any]] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the http.server convention)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            received.append({**json.loads(body), "_content_type": self.headers.get("Content-Type")})
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/alert", received
    server.shutdown()


@pytest.fixture
def prefect_server(tmp_path: Path) -> Iterator[str]:
    """`prefect server start` on a free port, its own PREFECT_HOME, automations on; its API URL."""
    port = _free_port()
    env = server_environment(
        {
            **os.environ,
            "PREFECT_HOME": str(tmp_path / "prefect"),
            "PREFECT_SERVER_SERVICES_TRIGGERS_ENABLED": "true",
            "PREFECT_SERVER_SERVICES_EVENT_PERSISTER_ENABLED": "true",
        },
        "127.0.0.1",
        port,
    )
    command = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1", "--port", str(port)]
    log = (tmp_path / "server.log").open("wb")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    try:
        wait_healthy(url, process, timeout_s=180)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def _wait_for(received: list[dict[str, Any]], wanted: Any, timeout_s: float = 90) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        hit = next((body for body in received if wanted(body)), None)
        if hit is not None:
            return hit
        time.sleep(0.5)
    raise AssertionError(f"no matching webhook POST within {timeout_s:.0f} s; received: {received}")


# Three flow runs against the server, in a process of their own as `strataflow run` would be (in this process
# the session's test harness owns Prefect's event worker): a strataflow-named flow that fails, one that
# closes with errors, and another project's flow that fails. Prints the three final states' flow run ids.
RUNS = """
import json
from prefect import flow
from prefect.runtime import flow_run
from models.params import RunCounts, RunSummary
from strataflow.ops import alerts
from strataflow.pipeline.runs import StageFailed, scope_ref

@flow(name="weekly")
def failing_weekly():
    raise StageFailed("rollup: all 1 unit(s) failed: " + scope_ref("t_alerts", "u1")
                      + ": LLMError: the model is unreachable")

@flow(name="nightly")
def nightly_with_errors():
    summary = RunSummary(flow="nightly", run_id="r-1", prefect_flow_run_id=str(flow_run.id),
                         status="completed_with_errors", counts=RunCounts(units_failed=1, llm_calls=3),
                         errors=["extract: " + scope_ref("t_alerts", "u2") + ": LLMError: rate limited"])
    return alerts.emit_run_events(summary)

@flow(name="someone-elses-flow")
def unrelated():
    raise RuntimeError("not ours")

states = [f(return_state=True) for f in (failing_weekly, nightly_with_errors, unrelated)]
print(json.dumps({"ids": [str(s.state_details.flow_run_id) for s in states],
                  "types": [s.type.value for s in states], "emitted": states[1].result()}))
"""


def test_a_failed_run_and_a_run_with_errors_reach_the_webhook_through_one_automation(
    prefect_server: str, webhook: tuple[str, list[dict[str, Any]]]
) -> None:
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings

    url, received = webhook
    with temporary_settings({PREFECT_API_URL: prefect_server}):
        alerts.register_alerts(url)
        alerts.register_alerts(url)  # again: replaced, not added
        with get_client(sync_client=True) as client:
            assert len(client.read_automations_by_name(alerts.AUTOMATION_NAME)) == 1
            (late,) = client.read_automations_by_name(alerts.LATE_AUTOMATION_NAME)
            assert late.enabled and late.trigger.within.total_seconds() == 240 * 60
            assert len(client.read_automations_by_name(alerts.LATE_START_AUTOMATION_NAME)) == 1
    env = {**os.environ, "PREFECT_API_URL": prefect_server}
    done = subprocess.run(
        [sys.executable, "-c", RUNS], env=env, capture_output=True, text=True, timeout=300, check=True
    )
    runs = json.loads(done.stdout.strip().splitlines()[-1])
    assert runs["types"] == ["FAILED", "COMPLETED", "FAILED"]
    assert runs["emitted"] == [alerts.EVENT_COMPLETED, alerts.EVENT_WITH_ERRORS]
    failed_id, errors_id, _ = runs["ids"]

    page = prefect_server.removesuffix("/api") + "/runs/flow-run/"
    hit = _wait_for(received, lambda body: body["flow_run_id"] == failed_id)
    assert hit["event"] == "prefect.flow-run.Failed" and hit["kind"] == "failed" and hit["flow"] == "weekly"
    assert hit["_content_type"] == "application/json"
    assert "StageFailed" in hit["state_message"] and "unreachable" not in json.dumps(hit)  # no error text
    assert hit["state"] == "FAILED" and hit["flow_run_name"] in hit["text"]
    assert hit["flow_run_url"] == page + failed_id
    assert hit["failed_scopes"] == [scope_ref("t_alerts", "u1")]
    hit = _wait_for(received, lambda body: body["event"] == alerts.EVENT_WITH_ERRORS)
    assert hit["flow_run_id"] == errors_id and hit["run_id"] == "r-1" and hit["flow"] == "nightly"
    assert hit["failed_scopes"] == [scope_ref("t_alerts", "u2")] and "rate limited" in hit["errors"][0]
    assert hit["counts"]["units_failed"] == 1 and hit["flow_run_url"] == page + errors_id
    time.sleep(3)  # what else arrives: only the two alerts (no completed event, no other flow's failure)
    # Prefect delivers an automation's action at least once: the same alert may arrive twice (2 of 5 runs
    # here), which a receiver dedupes by (event, flow_run_id); what must never arrive is another alert.
    delivered = {(body["event"], body["flow_run_id"]) for body in received}
    assert delivered == {("prefect.flow-run.Failed", failed_id), (alerts.EVENT_WITH_ERRORS, errors_id)}, (
        delivered
    )

    # A worker that is down: the 10-minute incremental's runs go Late one after another, and a nightly's.
    # One alert per flow (within LATE_REPEAT), not one per run.
    late_ids = _late_runs(prefect_server, {"incremental": 6, "nightly": 1})
    _wait_for(received, lambda body: body["kind"] == "late" and body["flow"] == "nightly")
    _wait_for(received, lambda body: body["kind"] == "late" and body["flow"] == "incremental")
    time.sleep(5)
    late = {(body["flow"], body["flow_run_id"]) for body in received if body["kind"] == "late"}
    assert sorted(flow for flow, _ in late) == ["incremental", "nightly"], late
    assert {run_id for _, run_id in late} <= set(late_ids)
    late_links = {body["flow_run_url"] for body in received if body["kind"] == "late"}
    assert late_links == {page + run_id for _, run_id in late}


def _late_runs(api: str, counts: dict[str, int]) -> list[str]:
    """Flow runs of these flows (name -> how many) that Prefect marks Late, one after another; their ids."""
    from prefect import flow
    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.states import Late, Scheduled

    ids = []
    with temporary_settings({PREFECT_API_URL: api}), get_client(sync_client=True) as client:
        for name, count in counts.items():

            @flow(name=name)
            def scheduled() -> None:
                return None

            for _ in range(count):
                run = client.create_flow_run(scheduled, state=Scheduled())
                client.set_flow_run_state(run.id, Late(), force=True)
                ids.append(str(run.id))
    return ids


def test_a_closed_run_emits_completed_and_only_a_run_with_errors_the_second_event() -> None:
    def summary(status: Any) -> RunSummary:
        return RunSummary(flow="weekly", run_id="r", status=status, counts=RunCounts())

    assert alerts.run_event_names(summary("completed")) == [alerts.EVENT_COMPLETED]
    assert alerts.run_event_names(summary("budget_stopped")) == [alerts.EVENT_COMPLETED]
    assert alerts.run_event_names(summary("completed_with_errors")) == [
        alerts.EVENT_COMPLETED,
        alerts.EVENT_WITH_ERRORS,
    ]
    assert alerts.run_event_names(summary("failed")) == []
    recovered = [alerts.EVENT_COMPLETED, alerts.EVENT_RECOVERED]
    assert alerts.run_event_names(summary("completed"), previous="failed") == recovered
    assert alerts.run_event_names(summary("completed"), previous="completed") == [alerts.EVENT_COMPLETED]


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://93.184.215.14/hook", True),  # a public address
        ("http://127.0.0.1:9/hook", True),  # a literal loopback address: the operator means this machine
        ("http://10.1.2.3/hook", False),
        ("http://192.168.0.7/hook", False),
        ("http://169.254.169.254/latest/meta-data", False),  # link-local: a cloud's metadata service
        ("http://localhost:9/hook", False),  # a name resolving to loopback is not literal
        ("ftp://93.184.215.14/hook", False),
    ],
)
def test_the_webhook_refuses_internal_addresses_unless_allowed(url: str, allowed: bool) -> None:
    from strataflow.errors import UserError

    if allowed:
        alerts.check_webhook(url, allow_private=False)
        return
    with pytest.raises(UserError):
        alerts.check_webhook(url, allow_private=False)
    if not url.startswith("ftp"):
        alerts.check_webhook(url, allow_private=True)
