"""Batched extraction vs a per-message approach (mem0 v1 style): `python -m bench.extract_tokens`.

Tokens, over the default sample (strataflow.demo.sample, written to a temp dir and ingested into namespace
bench_extract_<id>):
- batched: strataflow.pipeline.extract.extract_new, the real stage (one call per scope batch with the existing
keys);
  its prompt tokens are read from the LLM ledger (llm_calls) of its run;
- per-message: for each user message in ingest order, one call with the same instructions, that one message
  and ALL of the subject's existing memories (what mem0 v1 sent), through the same gateway and model
  (offline/rules by default), its prompt tokens read from the ledger of its own run.
Both ledgers count tokens the same way (the provider's usage, else litellm.token_counter). Target: ratio
<= 0.25.

Recall is NOT measured on the sample: its sidecar facts were written together with the offline rules, so
they would only measure the rules against themselves. It is measured on independent data, the LoCoMo dev
set (--locomo, default ../shared/data/locomo/locomo_dev3.json; snap-research/LoCoMo, CC BY-NC 4.0), whose
annotators wrote per session "observations" about each speaker, each citing the dialog turns (D1:3, ...)
that state it. Both approaches run over the LoCoMo turns (namespace bench_extract_locomo_<id>);
`recall_batched` / `recall_per_message` is the share of observations for which the approach produced at
least one item whose source_message_ids include a turn the observation cites (evidence recall: did the
extractor keep something from the turns an annotator found memorable). It says nothing about whether the
item's value matches the observation's wording. Without the LoCoMo file the recall keys are null.
Prints one JSON line last; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from models.llm import ExtractionOutput
from strataflow.config import Settings, load_settings
from strataflow.db import migrations
from strataflow.db.engine import engine_for
from strataflow.llm.gateway import LLMGateway
from strataflow.llm.prompt_blocks import json_lines_block, task_block, text_block
from strataflow.pipeline.extract import EXTRACT_ROLES, EXTRACT_SYSTEM, extract_new
from strataflow.pipeline.runs import record_run

DEFAULT_LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo_dev3.json"
DIALOG_ID = re.compile(r"D\d+:\d+")

PER_MESSAGE_PROMPT_VERSION = "bench-per-message-v1"
BENCH_BUDGET_TOKENS = 1_000_000_000  # the bench measures spending; it must not stop on the default budget

SELECT_RUN_PROMPT_TOKENS = text(
    "select coalesce(sum(prompt_tokens), 0), count(*) from llm_calls where run_id = :r"
)
SELECT_CITED_MESSAGES = text(
    """
    select distinct unnest(source_message_ids) from memory_item_versions where namespace = :ns
    union
    select distinct unnest(source_message_ids) from memory_items where namespace = :ns
    """
)
SELECT_TURN_IDS = text(
    "select message_id, subject_id, source_message_id from message_keys where namespace = :ns"
)
SELECT_USER_MESSAGES = text(
    """
    select subject_id, message_id, role, content, event_at from conversation_messages
    where namespace = :ns order by ingest_seq
    """
)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_observations(path: Path) -> list[tuple[str, set[str]]]:
    """LoCoMo observations as (sample_id, cited dialog turn ids), one per observation."""
    observations = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        for by_speaker in (sample.get("observation") or {}).values():
            for entries in by_speaker.values():
                for entry in entries:
                    cited = set(DIALOG_ID.findall(json.dumps(entry[1:])))
                    if cited:
                        observations.append((str(sample["sample_id"]), cited))
    return observations


def evidence_recall(
    engine: Engine, namespace: str, observations: list[tuple[str, set[str]]], cited: set[int]
) -> float:
    """Share of observations with at least one cited turn among the message ids the approach's items cite."""
    with engine.connect() as conn:
        turns = {
            row.message_id: (row.subject_id, row.source_message_id)
            for row in conn.execute(SELECT_TURN_IDS, {"ns": namespace})
        }
    kept = {turns[message_id] for message_id in cited if message_id in turns}
    hits = sum(any((sample, turn) in kept for turn in turn_ids) for sample, turn_ids in observations)
    return round(hits / len(observations), 4) if observations else 0.0


def run_batched(settings: Settings, engine: Engine, namespace: str) -> tuple[int, int, set[int]]:
    """The real stage: (prompt tokens, requests, message ids its items cite)."""
    run_ids: list[uuid.UUID] = []

    def work(run_id: uuid.UUID) -> Any:
        run_ids.append(run_id)
        return extract_new(settings, run_id=run_id, namespace=namespace, progress=False)

    record_run(engine, "bench.extract_tokens", {"approach": "batched"}, namespace, work)
    with engine.connect() as conn:
        tokens, calls = conn.execute(SELECT_RUN_PROMPT_TOKENS, {"r": run_ids[0]}).one()
        cited = {row[0] for row in conn.execute(SELECT_CITED_MESSAGES, {"ns": namespace})}
    return int(tokens), int(calls), cited


def per_message_prompt(message: Any, memories: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, str]]:
    user = "\n".join(
        [
            task_block("extract"),
            json_lines_block("memories", memories.values()),
            text_block("existing_keys", ""),
            json_lines_block(
                "messages",
                [
                    {
                        "id": message.message_id,
                        "role": message.role,
                        "time": message.event_at.isoformat(),
                        "text": message.content,
                    }
                ],
            ),
        ]
    )
    return [{"role": "system", "content": EXTRACT_SYSTEM}, {"role": "user", "content": user}]


def run_per_message(settings: Settings, engine: Engine, namespace: str) -> tuple[int, int, set[int]]:
    """Each user message with all of its subject's memories so far, one call each (mem0 v1):
    (prompt tokens, requests, message ids its items cite)."""
    run_ids: list[uuid.UUID] = []
    cited: set[int] = set()

    def work(run_id: uuid.UUID) -> dict[str, int]:
        run_ids.append(run_id)
        return per_message_calls(settings, engine, namespace, run_id, cited)

    record_run(engine, "bench.extract_tokens", {"approach": "per_message"}, namespace, work)
    with engine.connect() as conn:
        tokens, calls = conn.execute(SELECT_RUN_PROMPT_TOKENS, {"r": run_ids[0]}).one()
    return int(tokens), int(calls), cited


def per_message_calls(
    settings: Settings, engine: Engine, namespace: str, run_id: uuid.UUID, cited: set[int]
) -> dict[str, int]:
    gateway = LLMGateway(settings, run_id)
    memories: dict[str, dict[tuple[str, str], dict[str, Any]]] = defaultdict(dict)
    with engine.connect() as conn:
        messages = [
            m for m in conn.execute(SELECT_USER_MESSAGES, {"ns": namespace}) if m.role in EXTRACT_ROLES
        ]
    for index, message in enumerate(messages, 1):
        subject = memories[message.subject_id]
        output = gateway.complete(
            "extract",
            PER_MESSAGE_PROMPT_VERSION,
            per_message_prompt(message, subject),
            ExtractionOutput,
            namespace=namespace,
            subject_id=message.subject_id,
        )
        for item in output.items:
            subject[(item.kind.value, item.key)] = {
                "kind": item.kind.value,
                "key": item.key,
                "value": item.value,
                "statement": item.statement,
            }
            cited.update(i for i in item.source_message_ids if i == message.message_id)
        if index % 200 == 0:
            log(f"per-message: {index}/{len(messages)} messages")
    return {"messages": len(messages)}


def measure(settings: Settings, engine: Engine, namespace: str, label: str) -> dict[str, Any]:
    """Both approaches over one namespace: tokens, requests and the message ids their items cite."""
    figures: dict[str, Any] = {}
    for approach, run in (("batched", run_batched), ("per_message", run_per_message)):
        started = time.perf_counter()
        tokens, calls, cited = run(settings, engine, namespace)
        log(
            f"{label} {approach}: {calls} calls, {tokens} prompt tokens"
            f" ({time.perf_counter() - started:.1f}s)"
        )
        figures[approach] = {"tokens": tokens, "calls": calls, "cited": cited}
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7, help="sample seed")
    parser.add_argument("--locomo", type=Path, default=DEFAULT_LOCOMO, help="LoCoMo JSON for the recall")
    args = parser.parse_args()

    settings = load_settings()
    settings = settings.model_copy(
        update={"llm_budget_tokens": max(settings.llm_budget_tokens, BENCH_BUDGET_TOKENS)}
    )
    engine = engine_for(settings)
    migrations.upgrade(engine)

    from strataflow.demo.sample import write_sample
    from strataflow.pipeline.ingest import ingest_logs

    run_tag = uuid.uuid4().hex[:8]
    namespace = f"bench_extract_{run_tag}"
    with tempfile.TemporaryDirectory(prefix="strataflow-bench-extract-") as tmp:
        sample_dir = Path(tmp)
        write_sample(sample_dir, seed=args.seed, tz=settings.tz)
        ingested = ingest_logs(settings, [sample_dir], namespace=namespace, progress=False)
    log(f"ingested {ingested.inserted} sample messages into {namespace}")
    sample = measure(settings, engine, namespace, "sample")

    recall: dict[str, float | None] = {"batched": None, "per_message": None}
    observations: list[tuple[str, set[str]]] = []
    if args.locomo.exists():
        locomo_namespace = f"bench_extract_locomo_{run_tag}"
        observations = load_observations(args.locomo)
        turns = ingest_logs(settings, [args.locomo], namespace=locomo_namespace, progress=False)
        log(
            f"ingested {turns.inserted} LoCoMo turns into {locomo_namespace};"
            f" {len(observations)} observations"
        )
        locomo = measure(settings, engine, locomo_namespace, "locomo")
        for approach, figures in locomo.items():
            recall[approach] = evidence_recall(engine, locomo_namespace, observations, figures["cited"])
    else:
        log(f"{args.locomo} not found: recall not measured")

    batched, per_message = sample["batched"]["tokens"], sample["per_message"]["tokens"]
    print(
        json.dumps(
            {
                "batched_prompt_tokens": batched,
                "per_message_prompt_tokens": per_message,
                "ratio": round(batched / per_message, 4) if per_message else None,
                "recall_batched": recall["batched"],
                "recall_per_message": recall["per_message"],
                "recall_data": "LoCoMo observations (evidence recall)" if observations else None,
                "observations": len(observations),
                "batched_calls": sample["batched"]["calls"],
                "per_message_calls": sample["per_message"]["calls"],
                "messages": ingested.inserted,
                "model": settings.extract_model,
            }
        )
    )


if __name__ == "__main__":
    main()
