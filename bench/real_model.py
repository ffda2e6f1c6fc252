"""A real local model against the offline provider on labelled cases: `python -m bench.real_model`.

The cases below were written for this bench (English and Chinese, in the style of the seed examples and of
the LoCoMo dev evidence turns), each with the values its messages state. Each case is one extraction call:
the real prompt (strataflow/pipeline/extract_prompt.py build_extract_messages), the real gateway (its
structured output, its one repair turn and its ledger), once with the packaged local model served by
llama.cpp (strataflow/llm/local_model.py, started here on a free port, or the OpenAI-compatible server at
--api-base with --model) and once with offline/rules.

Printed last, one JSON line: model, cases, calls (requests sent to the real model, repairs included),
json_valid_first_try and json_valid_after_repair (shares of cases, read from llm_calls: the first request's
outcome, and whether any request of the case ended ok), value_recall and offline_value_recall (share of the
labelled values found among the values of the items extracted: numbers equal, strings equal or one inside the
other, case-folded), seconds_per_call (mean latency of the real model's requests), prompt_tokens_per_message
and the response_format used (STRATAFLOW_LLM_RESPONSE_FORMAT; json_object by default here:
llama-cpp-python's server refuses json_schema). Progress on
stderr. Needs the localmodel extra unless --api-base is given.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import text

from models.llm import ExtractionOutput
from strataflow.config import Settings, load_settings
from strataflow.db import migrations
from strataflow.db.engine import engine_for
from strataflow.hashes import content_hash
from strataflow.llm import local_model
from strataflow.llm.gateway import LLMError, LLMGateway
from strataflow.pipeline.extract_prompt import PROMPT_VERSION, STAGE, answer_context, build_extract_messages
from strataflow.pipeline.scopes import ScopeMessage

NAMESPACE = "bench_real_model"
# (case id, the subject's messages, the values they state)
CASES: list[tuple[str, list[str], list[Any]]] = [
    ("en-move", ["I moved to Lisbon in March and I work as a data engineer at Quintessa."],
     ["Lisbon", "data engineer", "Quintessa"]),
    ("en-family", ["My daughter Ana just started school; I'm allergic to shellfish, by the way."],
     ["Ana", "shellfish"]),
    ("en-age", ["I'm 29 and I live in Toronto."], [29, "Toronto"]),
    ("en-pets", ["We have two cats, Miso and Tofu.", "I'm vegetarian, so no meat for me."],
     ["Miso", "Tofu", "vegetarian"]),
    ("en-job", ["I've been a nurse for 12 years, now at St. Mary's Hospital in Leeds."],
     ["nurse", 12, "Leeds"]),
    ("en-school", ["I graduated from the University of Edinburgh with a degree in physics."],
     ["University of Edinburgh", "physics"]),
    ("en-plan", ["Next year I want to run the Berlin marathon.", "I'm training five days a week."],
     ["Berlin marathon"]),
    ("en-salary", ["My salary is 95000 dollars a year and I'd like to buy a house in Austin."],
     [95000, "Austin"]),
    ("en-locomo-1", ["I just signed up for a pottery class, it's so relaxing!",
                     "My husband and I have three kids."], ["pottery", 3]),
    ("en-locomo-2", ["I'm a transgender woman and I've been volunteering at an LGBTQ support group."],
     ["LGBTQ support group"]),
    ("en-lang", ["I speak Spanish and Portuguese fluently.", "My favourite food is sushi."],
     ["Spanish", "Portuguese", "sushi"]),
    ("zh-bank", ["我今年35岁，在上海的一家银行做风控经理。"], [35, "上海", "风控经理"]),
    ("zh-immigrate", ["我们打算明年移民加拿大，预算大概五十万。"], ["加拿大", 500000]),
    ("zh-school", ["我是浙大计算机专业毕业的，工作8年了。"], ["浙江大学", "计算机", 8]),
    ("zh-salary", ["年薪大概80万，在深圳做产品经理。"], [800000, "深圳", "产品经理"]),
    ("zh-family", ["我有一个女儿，今年6岁，叫小米。"], ["小米", 6]),
    ("zh-allergy", ["我对花生过敏，平时喜欢吃川菜。"], ["花生", "川菜"]),
    ("zh-pet", ["家里养了一只金毛，叫豆豆。"], ["金毛", "豆豆"]),
    ("zh-hk", ["我想申请香港的优才计划，现在在北京工作。"], ["QMAS", "北京"]),
    ("zh-city", ["我老家是成都的，现在住在杭州。"], ["成都", "杭州"]),
    ("zh-job", ["我是一名小学老师，教数学。", "周末喜欢去爬山。"], ["小学老师", "数学", "爬山"]),
    ("zh-age-range", ["我三十多岁，在广州开了一家咖啡店。"], ["30+", "广州", "咖啡店"]),
]  # fmt: skip
SELECT_CASE_CALLS = text(
    """
    select subject_id, attempt, outcome, prompt_tokens, latency_ms from llm_calls
    where namespace = :ns and prompt_version = :pv and model = :model order by subject_id, attempt
    """
)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def case_messages(texts: list[str]) -> list[ScopeMessage]:
    start = datetime(2026, 11, 2, 9, tzinfo=UTC)
    return [
        ScopeMessage(index + 1, "user", body, content_hash(body), start + timedelta(minutes=index), index + 1)
        for index, body in enumerate(texts)
    ]


def flat_values(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [v for inner in value.values() for v in flat_values(inner)]
    if isinstance(value, list):
        return [v for inner in value for v in flat_values(inner)]
    return [value]


def found(expected: Any, values: list[Any]) -> bool:
    """Whether an extracted value states the expected one (numbers equal; strings equal or one inside the
    other, case-folded)."""
    for value in values:
        if isinstance(expected, (int, float)) and not isinstance(expected, bool):
            try:
                if float(str(value).replace(",", "")) == float(expected):
                    return True
            except ValueError:
                pass
            continue
        got, want = str(value).casefold().strip(), str(expected).casefold()
        if got and (want in got or (len(got) >= 2 and got in want)):
            return True
    return False


def run_cases(settings: Settings, prompt_version: str) -> tuple[int, int, float]:
    """Every case through one model: (values found, values labelled, seconds)."""
    gateway = LLMGateway(settings, None)
    hit = total = 0
    started = time.monotonic()
    for number, (case_id, texts, expected) in enumerate(CASES, start=1):
        messages = case_messages(texts)
        prompt = build_extract_messages(messages, [])
        t0 = time.monotonic()
        try:
            output = gateway.complete(
                STAGE,
                prompt_version,
                prompt,
                ExtractionOutput,
                namespace=NAMESPACE,
                subject_id=case_id,
                fresh=True,
                context=answer_context(messages),  # validated as the stage validates
            )
            values = [v for item in output.items for v in flat_values(item.value)]
        except LLMError as exc:
            log(f"  {case_id}: {exc}")
            values = []
        case_hits = sum(found(value, values) for value in expected)
        hit, total = hit + case_hits, total + len(expected)
        took = time.monotonic() - t0
        log(f"[{number}/{len(CASES)}] {case_id}: {case_hits}/{len(expected)} values, {took:.1f}s")
    return hit, total, time.monotonic() - started


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_models(url: str, process: subprocess.Popen[bytes] | None, timeout_s: float = 600) -> str:
    """The first model id GET {url}/models lists, once the server answers."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise SystemExit(f"the model server exited with code {process.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=5) as response:
                return str(json.load(response)["data"][0]["id"])
        except (OSError, ValueError, KeyError, IndexError):
            time.sleep(1)
    raise SystemExit(f"no model server at {url} after {timeout_s:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api-base", help="an OpenAI-compatible server already running (default: start one)")
    parser.add_argument("--model", help="with --api-base: the model id (default: the first it lists)")
    args = parser.parse_args()
    settings = load_settings()
    migrations.upgrade(engine_for(settings))
    server: subprocess.Popen[bytes] | None = None
    url = args.api_base
    # litellm's OpenAI client wants a key even for a local server, which ignores it (without one every
    # request failed as HTTP 500 before it was sent)
    os.environ.setdefault("OPENAI_API_KEY", "local")
    if url is None:
        path = local_model.assemble(settings.home)
        command = local_model.serve_command(path, "127.0.0.1", free_port())
        log(f"starting llama.cpp on {path.name} at {command.url} ...")
        server = subprocess.Popen(command.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = command.url
    try:
        model_id = args.model or wait_for_models(url, server)
        fmt = settings.llm_response_format if settings.llm_response_format != "auto" else "json_object"
        real = settings.model_copy(
            update={"extract_model": f"openai/{model_id}", "llm_api_base": url, "llm_response_format": fmt,
                    "llm_timeout_s": max(settings.llm_timeout_s, 600.0), "llm_budget_tokens": 10**9}
        )  # fmt: skip
        offline = settings.model_copy(update={"llm_budget_tokens": 10**9})
        prompt_version = f"{PROMPT_VERSION}-bench-{uuid.uuid4().hex[:8]}"
        log(f"{len(CASES)} cases with openai/{model_id} ({fmt}) ...")
        hits, labelled, _ = run_cases(real, prompt_version)
        log("the same cases with offline/rules ...")
        offline_hits, _, _ = run_cases(offline, prompt_version)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    with engine_for(settings).connect() as conn:
        params = {"ns": NAMESPACE, "pv": prompt_version, "model": real.extract_model}
        rows = list(conn.execute(SELECT_CASE_CALLS, params))
    first = {r.subject_id: r.outcome for r in rows if r.attempt == 1}
    ok = {r.subject_id for r in rows if r.outcome == "ok"}
    messages = sum(len(texts) for _, texts, _ in CASES)
    print(json.dumps({
        "model": real.extract_model,
        "response_format": fmt,
        "cases": len(CASES),
        "calls": len(rows),
        "json_valid_first_try": round(sum(o == "ok" for o in first.values()) / len(CASES), 3),
        "json_valid_after_repair": round(len(ok) / len(CASES), 3),
        "value_recall": round(hits / labelled, 3),
        "offline_value_recall": round(offline_hits / labelled, 3),
        "values_labelled": labelled,
        "seconds_per_call": round(sum(r.latency_ms for r in rows) / max(len(rows), 1) / 1000, 2),
        "prompt_tokens_per_message": round(sum(r.prompt_tokens for r in rows) / messages, 1),
    }))  # fmt: skip


if __name__ == "__main__":
    main()
