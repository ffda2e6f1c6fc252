"""`strataflow demo --model local`: the tour with every stage on the packaged local model.

The model is assembled and served by llama.cpp (strataflow/llm/local_model.py) on a free port for the length
of the tour; the stages are pointed at it through the environment the flows read (STRATAFLOW_EXTRACT_MODEL,
_ROLLUP_MODEL, _REFLECT_MODEL, STRATAFLOW_LLM_API_BASE, STRATAFLOW_LLM_RESPONSE_FORMAT=json_schema). A small
CPU model takes seconds per call, so the tour is smaller (LOCAL_SUBJECTS subjects, LOCAL_WEEKS week, its own
sample directory) and a time estimate is printed from one timed request before the flows start.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any

from strataflow.config import Settings, load_settings
from strataflow.demo import tour
from strataflow.llm import local_model

LOCAL_SUBJECTS = 2
LOCAL_WEEKS = 1
PROBE = [{"role": "user", "content": 'Reply with the JSON object {"ok": true} and nothing else.'}]


def _seconds_per_call(url: str) -> float:
    """One small timed request; a stage's call sends a longer prompt, so this is a lower bound (x3 below)."""
    body = json.dumps({"model": local_model.MODEL_ID, "messages": PROBE, "max_tokens": 16}).encode()
    request = urllib.request.Request(
        f"{url}/chat/completions", data=body, headers={"Content-Type": "application/json"}
    )
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=300) as response:
        response.read()
    return time.monotonic() - started


@contextmanager
def served_model(settings: Settings, threads: int | None = None) -> Iterator[str]:
    """The packaged model served on a free port for the block (strataflow/llm/local_model.py served; threads:
    llama.cpp's, default all cores but one); yields its /v1 URL."""
    log = settings.home.expanduser() / "logs" / "local-model.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"starting llama.cpp with {local_model.MODEL_ID} (log: {log}) ...", file=sys.stderr)
    with local_model.served(settings.home, log=log, threads=threads) as command:
        yield command.url


def local_environment(url: str) -> dict[str, str]:
    model = f"openai/{local_model.MODEL_ID}"
    return {
        "STRATAFLOW_EXTRACT_MODEL": model,
        "STRATAFLOW_ROLLUP_MODEL": model,
        "STRATAFLOW_REFLECT_MODEL": model,
        "STRATAFLOW_LLM_API_BASE": url,
        "STRATAFLOW_LLM_RESPONSE_FORMAT": local_model.RESPONSE_FORMAT,
        "STRATAFLOW_LLM_TIMEOUT_S": "600",
        "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY", "local"),
    }


def run_local_demo(settings: Settings, out: Path | None) -> str:
    """The tour on the local model: serve it, point the stages at it, estimate, run, stop it."""
    out = out or settings.home / "demo-local"
    with served_model(settings) as url:
        os.environ.update(local_environment(url))  # what the flows' load_settings() reads
        local = load_settings()
        per_call = 3 * _seconds_per_call(url)

        def estimate(info: dict[str, Any]) -> None:
            days = (date.fromisoformat(info["end"]) - date.fromisoformat(info["start"])).days + 1
            calls = LOCAL_SUBJECTS * (
                2 * days + 2 * LOCAL_WEEKS
            )  # extract + hot memory a day; rollup, reflect
            print(
                f"estimate: about {calls} model calls at about {per_call:.0f} s each on this machine, "
                f"so roughly {calls * per_call / 60:.0f} minutes",
                file=sys.stderr,
            )

        return tour.run_demo(local, out, LOCAL_SUBJECTS, LOCAL_WEEKS, before_flows=estimate)
