"""The model a benchmark extracts with: the configured one, offline/rules, the packaged local model (served by
llama.cpp on a free loopback port for the run: strataflow.demo.local.served_model, the command of
strataflow.llm.local_model.serve_command that `strataflow model serve` runs; its log is
STRATAFLOW_HOME/logs/local-model.log) or an OpenAI-compatible server already running. Used by
bench.extraction and bench.real_model."""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from strataflow.config import OFFLINE_MODEL, Settings
from strataflow.demo.local import served_model
from strataflow.llm import local_model

LOCAL = "local"
OFFLINE = "offline"
REAL_MODEL_TIMEOUT_S = 600.0  # a small model on two loaded cores takes minutes on a long batch
BENCH_BUDGET_TOKENS = 10**9  # a bench measures; the default budget must not stop it


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def wait_for_models(url: str, timeout_s: float = 600) -> str:
    """The first model id GET {url}/models lists, once the server answers."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=5) as response:
                return str(json.load(response)["data"][0]["id"])
        except (OSError, ValueError, KeyError, IndexError):
            time.sleep(1)
    raise SystemExit(f"no model server at {url} after {timeout_s:.0f} s")


def served_settings(
    settings: Settings, url: str, model_id: str, default_format: str = "json_object"
) -> Settings:
    """Settings that send extraction to an OpenAI-compatible server at url (the response format configured,
    else default_format: json_object for a server we do not know, which every one takes; the packaged
    model's runtime, llama.cpp's server, gets local_model.RESPONSE_FORMAT)."""
    fmt = settings.llm_response_format if settings.llm_response_format != "auto" else default_format
    # litellm's OpenAI client wants a key even for a local server, which ignores it (without one every
    # request failed as HTTP 500 before it was sent)
    os.environ.setdefault("OPENAI_API_KEY", "local")
    return settings.model_copy(
        update={"extract_model": f"openai/{model_id}", "llm_api_base": url, "llm_response_format": fmt,
                "llm_timeout_s": max(settings.llm_timeout_s, REAL_MODEL_TIMEOUT_S),
                "llm_budget_tokens": BENCH_BUDGET_TOKENS}
    )  # fmt: skip


@contextmanager
def extraction_settings(
    settings: Settings, model: str | None, api_base: str | None, threads: int | None = None
) -> Iterator[Settings]:
    """Settings whose extract_model is the one asked for: None (the configured model), "offline"
    (offline/rules), "local" (the packaged model, served for the block with `threads` llama.cpp threads,
    default every core), a model id on the server at api_base (or the first it lists), or any litellm
    model string.

    Every core, not `strataflow model serve`'s all but one: a bench sends one request at a time and waits
    for it, so nothing of its own runs beside the model, and llama.cpp's threads then have the cores to
    themselves (the 0.5B on this 2-core machine, quiet: six answers in 34.7 s with 2 threads, 64.0 s with
    1). On a machine busy with other work, give fewer (--threads)."""
    if api_base is not None:
        yield served_settings(settings, api_base, model or wait_for_models(api_base))
    elif model == LOCAL:
        with served_model(settings, threads or os.cpu_count()) as url:
            yield served_settings(settings, url, wait_for_models(url), local_model.RESPONSE_FORMAT)
    else:
        chosen = OFFLINE_MODEL if model == OFFLINE else model or settings.extract_model
        update = {"extract_model": chosen, "llm_budget_tokens": BENCH_BUDGET_TOKENS}
        yield settings.model_copy(update=update)
