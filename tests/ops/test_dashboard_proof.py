"""bench.dashboard, the screenshot-free proof of the dashboard: every panel query evaluated in a real
Prometheus (Debian's `prometheus`, when installed) that scrapes an exporter, one line per query, NO DATA for
an empty one and exit status 1 then."""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from bench import dashboard

EXPORTED = "# TYPE strataflow_http_request_duration_seconds histogram\n" + "".join(
    f'strataflow_http_request_duration_seconds_{part}{{route="/v1/context",status="200"{le}}} {value}\n'
    for part, le, value in (("bucket", ',le="+Inf"', 1), ("count", "", 1), ("sum", "", 0.01))
)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _scraped(base: str) -> bool:
    try:
        return bool(
            dashboard._get(
                base, "/api/v1/query", {"query": "strataflow_http_request_duration_seconds_count"}
            )["result"]
        )
    except OSError:
        return False


def test_every_panel_query_is_one_line_and_an_empty_one_fails() -> None:
    titles = [
        title
        for title, _ in dashboard.panel_queries(
            {
                "panels": [
                    {"title": "row", "panels": [{"title": "a", "targets": [{"expr": "up"}, {"expr": ""}]}]}
                ]
            }
        )
    ]
    assert titles == ["a"]
    assert dashboard.concrete('rate(x{job=~"$job"}[$__rate_interval])') == 'rate(x{job=~".*"}[1m])'


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="prometheus is not installed")
def test_a_real_prometheus_answers_each_panel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    class Exporter(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = EXPORTED.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    exporter = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Exporter)
    threading.Thread(target=exporter.serve_forever, daemon=True).start()
    port = _port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s}\nscrape_configs:\n  - job_name: api\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{exporter.server_address[1]}']\n"
    )
    prom = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not _scraped(base):
            time.sleep(0.5)
        assert dashboard.main(["--prometheus", base, "--at", "newest"]) == 1
    finally:
        prom.terminate()
        prom.wait(30)
        exporter.shutdown()
    lines = capsys.readouterr().out.splitlines()
    queries = dashboard.panel_queries(json.loads(dashboard.DASHBOARD.read_text(encoding="utf-8")))
    assert len(lines) == len(queries) + 1
    assert "Database pool: NO DATA" in lines
    assert any(line.startswith("Server errors (5xx) share: {}=0") for line in lines)
    summary = json.loads(lines[-1])
    assert summary["queries"] == len(queries) and "Database pool" in summary["no_data"]
    assert 0 < summary["ratio"] < 1
