"""The dashboard without a screenshot: `python -m bench.dashboard --prometheus URL [--at newest|UNIX_TIME]`.

Evaluates every query of docs/grafana-dashboard.json in a Prometheus that scrapes the API's GET /metrics and
the run textfile (as Grafana would: $job = .*, $__rate_interval = 1m) and prints one line per panel query:
the panel's title, then each returned series as labels=value, or `NO DATA` (what Grafana shows as "No data").
`--at newest` evaluates at the newest sample of the Prometheus's head block, so a Prometheus restarted on a
kept data directory (with no scrape targets) still answers as it did at the end of the traffic. The last line
is JSON: `ratio` the share of queries with data, `no_data` their panels. Exits 1 when any query has none.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DASHBOARD = Path(__file__).resolve().parents[1] / "docs" / "grafana-dashboard.json"


def panel_queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(title, PromQL) of every target of every panel, rows' nested panels included, in order."""

    def walk(panels: list[dict[str, Any]] | None) -> Iterator[dict[str, Any]]:
        for panel in panels or []:
            yield panel
            yield from walk(panel.get("panels"))

    return [
        (str(panel.get("title", "?")), str(target["expr"]))
        for panel in walk(dashboard.get("panels"))
        for target in panel.get("targets") or []
        if target.get("expr")
    ]


def concrete(expr: str) -> str:
    """The query as Grafana sends it with every job selected and a 1m rate interval."""
    for variable, value in (
        ("$__rate_interval", "1m"),
        ("$__interval", "1m"),
        ('"$job"', '".*"'),
        ("$job", ".*"),
    ):
        expr = expr.replace(variable, value)
    return expr


def _get(prometheus: str, path: str, params: dict[str, str] | None = None) -> Any:
    url = prometheus.rstrip("/") + path + ("?" + urllib.parse.urlencode(params) if params else "")
    with urllib.request.urlopen(url, timeout=60) as response:
        body = json.load(response)
    if body.get("status") != "success":
        raise RuntimeError(f"{path}: {str(body)[:200]}")
    return body["data"]


def newest_sample_time(prometheus: str) -> float:
    """Seconds since the epoch of the newest sample in the head block."""
    return int(_get(prometheus, "/api/v1/status/tsdb")["headStats"]["maxTime"]) / 1000


def describe(series: dict[str, Any]) -> str:
    labels = ",".join(f"{k}={v}" for k, v in sorted(series["metric"].items()) if k != "__name__")
    return f"{{{labels}}}={float(series['value'][1]):.4g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prometheus", required=True, help="base URL, e.g. http://127.0.0.1:9090")
    parser.add_argument("--dashboard", type=Path, default=DASHBOARD)
    parser.add_argument("--at", default="", help="'newest' or seconds since the epoch (default: now)")
    args = parser.parse_args(argv)
    params: dict[str, str] = {}
    if args.at:
        params["time"] = str(newest_sample_time(args.prometheus) if args.at == "newest" else float(args.at))
    queries = panel_queries(json.loads(args.dashboard.read_text(encoding="utf-8")))
    empty = []
    for title, expr in queries:
        result = _get(args.prometheus, "/api/v1/query", {"query": concrete(expr), **params})["result"]
        if not result:
            empty.append(title)
        print(f"{title}: {'; '.join(describe(s) for s in result) if result else 'NO DATA'}")
    ratio = round((len(queries) - len(empty)) / len(queries), 3)
    summary = {"ratio": ratio, "queries": len(queries), "no_data": empty}
    print(json.dumps(summary))
    return 1 if empty else 0


if __name__ == "__main__":
    sys.exit(main())
