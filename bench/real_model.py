"""A real local model against the offline provider on labelled cases: `python -m bench.real_model`.

The cases are bench.extraction's cases tagged real_model (bench/data/extraction_*.json: English and
Chinese, in the style of the seed examples and of the LoCoMo dev evidence turns), each with the values its
messages state; bench.extraction measures them with the rest (precision, updates, nothing to keep). Each case
is one extraction call: the real prompt (strataflow/pipeline/extract_prompt.py build_extract_messages), the
real gateway (its structured output, its one repair turn and its ledger), once with the packaged local model
served by llama.cpp (strataflow/llm/local_model.py, started here on a free port by bench/model_server.py, or
the OpenAI-compatible server at --api-base with --model) and once with offline/rules.

Printed last, one JSON line: model, cases, calls (requests sent to the real model, repairs included),
json_valid_first_try and json_valid_after_repair (shares of cases, read from llm_calls: the first request's
outcome, and whether any request of the case ended ok), value_recall and offline_value_recall (share of the
labelled values found among the values of the items extracted, by bench.extraction's matching rule in
bench/extraction_cases.py), seconds_per_call (mean latency of the real model's requests),
prompt_tokens_per_message and the response_format used (STRATAFLOW_LLM_RESPONSE_FORMAT; json_object by
default here: llama-cpp-python's server refuses json_schema). Progress on stderr. Needs the localmodel extra
unless --api-base is given.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import text

from bench.extraction_cases import Label, leaves, load_cases, matches_label
from bench.model_server import BENCH_BUDGET_TOKENS, LOCAL, extraction_settings, log
from models.llm import ExtractionOutput
from strataflow.config import Settings, load_settings
from strataflow.db import migrations
from strataflow.db.engine import engine_for
from strataflow.hashes import content_hash
from strataflow.llm.gateway import LLMError, LLMGateway
from strataflow.pipeline.extract_prompt import PROMPT_VERSION, STAGE, answer_context, build_extract_messages
from strataflow.pipeline.scopes import ScopeMessage

NAMESPACE = "bench_real_model"
# (case id, the subject's messages, the values they state): bench.extraction's cases tagged real_model
CASES: list[tuple[str, list[str], list[Label]]] = [
    (case.id, case.user_turns(), list(case.values)) for case in load_cases() if "real_model" in case.tags
]
SELECT_CASE_CALLS = text(
    """
    select subject_id, attempt, outcome, prompt_tokens, latency_ms from llm_calls
    where namespace = :ns and prompt_version = :pv and model = :model order by subject_id, attempt
    """
)


def case_messages(texts: list[str]) -> list[ScopeMessage]:
    start = datetime(2026, 11, 2, 9, tzinfo=UTC)
    return [
        ScopeMessage(index + 1, "user", body, content_hash(body), start + timedelta(minutes=index), index + 1)
        for index, body in enumerate(texts)
    ]


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
            values = [v for item in output.items for v in leaves(item.value)]
        except LLMError as exc:
            log(f"  {case_id}: {exc}")
            values = []
        case_hits = sum(any(matches_label(v, label) for v in values) for label in expected)
        hit, total = hit + case_hits, total + len(expected)
        took = time.monotonic() - t0
        log(f"[{number}/{len(CASES)}] {case_id}: {case_hits}/{len(expected)} values, {took:.1f}s")
    return hit, total, time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api-base", help="an OpenAI-compatible server already running (default: start one)")
    parser.add_argument("--model", help="with --api-base: the model id (default: the first it lists)")
    args = parser.parse_args()
    settings = load_settings()
    migrations.upgrade(engine_for(settings))
    with extraction_settings(settings, args.model if args.api_base else LOCAL, args.api_base) as real:
        offline = settings.model_copy(update={"llm_budget_tokens": BENCH_BUDGET_TOKENS})
        prompt_version = f"{PROMPT_VERSION}-bench-{uuid.uuid4().hex[:8]}"
        fmt = real.llm_response_format
        log(f"{len(CASES)} cases with {real.extract_model} ({fmt}) ...")
        hits, labelled, _ = run_cases(real, prompt_version)
        log("the same cases with offline/rules ...")
        offline_hits, _, _ = run_cases(offline, prompt_version)
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
