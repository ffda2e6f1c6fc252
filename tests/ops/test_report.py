"""`strataflow report`: a static offline HTML page whose plots draw in headless Chromium."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


def _chromium() -> str:
    """The system browser, else a skip (a failure with STRATAFLOW_REQUIRE_BROWSER=1, which CI sets)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    reason = "no headless Chromium on PATH (install it: apt-get install -y chromium)"
    if os.environ.get("STRATAFLOW_REQUIRE_BROWSER") == "1":
        pytest.fail(f"{reason}; STRATAFLOW_REQUIRE_BROWSER=1 says this machine must have one")
    pytest.skip(reason)


def test_report_page_is_offline_and_its_plots_draw_in_chromium(
    settings: Any, access_data: Any, tmp_path: Path
) -> None:
    from strataflow.cli import app

    out = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["report", "--out", str(out), "--namespace", access_data.namespace])
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)=["']https?://""", page), (
        "the page must not load anything from the web"
    )
    assert page.count('<svg class="plot"') == 6

    dom = subprocess.run(
        [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chrome'}", "--dump-dom", out.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    drawn = re.search(r'<body data-plots-drawn="(\d+)"', dom)
    assert drawn is not None, dom[:500]
    assert int(drawn.group(1)) >= 5, "the script marks each plot laid out with data points"
    points = re.findall(r'<circle class="point"[^>]*data-series="([^"]*)"', dom)
    assert access_data.namespace in points, "messages per day by namespace has the loaded namespace"
    assert "Memory items by kind (memories)" in dom and "Pipeline health (pipeline_health)" in dom


def test_the_time_plots_are_on_event_weeks_and_the_namespace_filter_holds(
    settings: Any, engine: Any, access_data: Any
) -> None:
    from datetime import date, datetime, timedelta

    from strataflow.ops.report import EVERYTHING, collect_plots

    with engine.connect() as conn:
        plots = {plot.title: plot for plot in collect_plots(conn, access_data.namespace, EVERYTHING)}
        everyone = {plot.title: plot for plot in collect_plots(conn, None, EVERYTHING)}
    # the dataset's messages span 40 days, all ingested and extracted in one go today
    today = datetime.now(settings.tz).date()
    items = plots["Memory items by kind over event weeks"].series
    weeks = {day for points in items.values() for day, _ in points}
    assert all(day.weekday() == 0 for day in weeks), "one point per ISO week, at its Monday"
    assert len(weeks) >= 5 and min(weeks) <= today - timedelta(days=35)
    tokens = {day for day, _ in plots["LLM tokens per event week"].series["tokens"]}
    assert len(tokens) >= 3 and all(isinstance(day, date) and day.weekday() == 0 for day in tokens)
    messages = plots["Messages per event week by namespace"].series
    assert list(messages) == [access_data.namespace] and len(messages[access_data.namespace]) >= 5
    assert access_data.namespace in everyone["Messages per event week by namespace"].series
