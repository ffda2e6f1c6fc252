"""The nightly's extraction cost for 10k messages at list and at batch prices: `python -m bench.batch_cost`.

The messages: the LoCoMo dev dialogs (--locomo, default ../shared/data/locomo/locomo_dev3.json; read, never
copied) or, without them, the demo sample. The requests are exactly the ones the nightly would send for them
(strataflow.pipeline.extract_batch.extract_batch_requests, built for each priced model: its prompt, its
response_format), nothing sent; their prompt tokens are counted with litellm.token_counter for that model.
A model's answers cannot be had offline, so completion tokens come from the offline extractor's answers to
the same messages (the real stage, `offline/rules`, its ledger): a real model writes longer or shorter
answers, and the figure says which basis it used.

Cost per model: list = prompt x input_cost_per_token + completion x output_cost_per_token (litellm's cost
map, shipped with it: LITELLM_LOCAL_MODEL_COST_MAP); batch = litellm's batch_cost_calculator (the *_batches
prices, else half the list price). Prints one JSON line last: per model the 10k-message cost both ways,
and `ratio` = batch / list for the first model.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import text

DEFAULT_LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev3.json"
MODELS = ("openai/gpt-4o-mini", "openai/gpt-4.1-mini")
PER = 10_000
SELECT_TOKENS = text(
    "select coalesce(sum(completion_tokens), 0) from llm_calls where namespace = :ns and stage = 'extract'"
)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO, help="LoCoMo JSON (else the sample)")
    args = parser.parse_args()

    from strataflow.config import load_settings
    from strataflow.db import migrations
    from strataflow.db.engine import engine_for
    from strataflow.llm import lazy
    from strataflow.llm.batch import batch_cost
    from strataflow.pipeline.extract import extract_new
    from strataflow.pipeline.extract_batch import extract_batch_requests
    from strataflow.pipeline.ingest import ingest_logs

    settings = load_settings()
    engine = engine_for(settings)
    migrations.upgrade(engine)
    namespace = f"bench_batch_cost_{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="strataflow-bench-batch-") as tmp:
        if args.locomo.exists():
            source, paths = "LoCoMo dev dialogs", [args.locomo]
        else:
            from strataflow.demo.sample import write_sample

            write_sample(Path(tmp), seed=7, tz=settings.tz)
            source, paths = "demo sample", [Path(tmp)]
        messages = ingest_logs(settings, paths, namespace=namespace, progress=False).inserted
    log(f"ingested {messages} messages ({source}) into {namespace}")

    litellm = lazy.litellm()
    prompt_tokens: dict[str, int] = {}
    requests = 0
    for model in MODELS:
        priced = settings.model_copy(update={"extract_model": model})
        built = extract_batch_requests(priced, namespace)
        requests = len(built)
        prompt_tokens[model] = sum(
            litellm.token_counter(model=model.removeprefix("openai/"), messages=r.body["messages"])
            for r in built
        )
        log(f"{model}: {requests} requests, {prompt_tokens[model]} prompt tokens")

    extract_new(settings, namespace=namespace, progress=False)  # the offline answers, for completion tokens
    with engine.connect() as conn:
        completion = int(conn.execute(SELECT_TOKENS, {"ns": namespace}).scalar() or 0)

    figures: dict[str, Any] = {}
    for model in MODELS:
        info = litellm.get_model_info(model=model.removeprefix("openai/"))
        prompt_per = prompt_tokens[model] / messages * PER
        completion_per = completion / messages * PER
        listed = prompt_per * info["input_cost_per_token"] + completion_per * info["output_cost_per_token"]
        batched = batch_cost(model, round(prompt_per), round(completion_per)) or 0.0
        figures[model] = {
            "prompt_tokens_per_10k": round(prompt_per),
            "completion_tokens_per_10k": round(completion_per),
            "list_usd_per_10k": round(listed, 4),
            "batch_usd_per_10k": round(batched, 4),
        }
    first = figures[MODELS[0]]
    print(
        json.dumps(
            {
                "messages": messages,
                "source": source,
                "requests": requests,
                "completion_basis": "offline/rules answers",
                "models": figures,
                "ratio": round(first["batch_usd_per_10k"] / first["list_usd_per_10k"], 4),
            }
        )
    )


if __name__ == "__main__":
    main()
