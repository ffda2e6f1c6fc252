"""Batched extraction vs a per-message approach (mem0 v1 style): `python -m bench.extract_tokens`.

Over the default sample (strataflow.demo.sample, written to a temp dir and ingested into namespace
bench_extract_<id>):
- batched: tasks.extract.extract_new, the real stage (one call per scope batch with the existing keys);
  its prompt tokens are read from the LLM ledger (llm_calls) of its run;
- per-message: for each user message in ingest order, one call with the same instructions, that one message
  and ALL of the subject's existing memories (what mem0 v1 sent), through the same gateway and model
  (offline/rules by default), its prompt tokens read from the ledger of its own run.
Both ledgers count tokens the same way (the provider's usage, else litellm.token_counter). Recall is the share
of the sidecar facts (DIR/facts/facts.jsonl) whose (subject, key, value) the approach produced at any point
(current value or history). Prints one JSON line last; progress on stderr. Target: ratio <= 0.25.
"""

from __future__ import annotations

import argparse
import json
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
from strataflow.ops.runs import finish_run, start_run
from tasks.extract import EXTRACT_ROLES, EXTRACT_SYSTEM, extract_new

PER_MESSAGE_PROMPT_VERSION = "bench-per-message-v1"
BENCH_BUDGET_TOKENS = 1_000_000_000  # the bench measures spending; it must not stop on the default budget

SELECT_RUN_PROMPT_TOKENS = text(
    "select coalesce(sum(prompt_tokens), 0), count(*) from llm_calls where run_id = :r"
)
SELECT_EXTRACTED_VALUES = text(
    """
    select subject_id, key, value from memory_item_versions where namespace = :ns
    union
    select subject_id, key, value from memory_items where namespace = :ns
    """
)
SELECT_USER_MESSAGES = text(
    """
    select subject_id, message_id, role, content, event_at from conversation_messages
    where namespace = :ns order by ingest_seq
    """
)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def normalise(value: Any) -> str:
    """A comparable form of a fact value: strings trimmed and lower-cased, lists order-free."""
    if isinstance(value, str):
        return json.dumps(value.strip().lower(), ensure_ascii=False)
    if isinstance(value, list):
        return json.dumps(sorted(normalise(v) for v in value), ensure_ascii=False)
    if isinstance(value, float) and value.is_integer():
        return json.dumps(int(value))
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def load_facts(sample_dir: Path) -> list[dict[str, Any]]:
    path = sample_dir / "facts" / "facts.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def recall(facts: list[dict[str, Any]], found: set[tuple[str, str, str]]) -> float:
    if not facts:
        return 0.0
    hits = sum((f["subject_id"], f["key"], normalise(f["value"])) in found for f in facts)
    return round(hits / len(facts), 4)


def run_batched(
    settings: Settings, engine: Engine, namespace: str
) -> tuple[int, int, set[tuple[str, str, str]]]:
    run_id = start_run(engine, "bench.extract_tokens", {"approach": "batched"}, namespace=namespace)
    result = extract_new(settings, run_id=run_id, namespace=namespace, progress=False)
    finish_run(engine, run_id, "completed", result.model_dump(exclude={"errors", "manual_conflicts"}))
    with engine.connect() as conn:
        tokens, calls = conn.execute(SELECT_RUN_PROMPT_TOKENS, {"r": run_id}).one()
        found = {(s, k, normalise(v)) for s, k, v in conn.execute(SELECT_EXTRACTED_VALUES, {"ns": namespace})}
    return int(tokens), int(calls), found


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


def run_per_message(
    settings: Settings, engine: Engine, namespace: str
) -> tuple[int, int, set[tuple[str, str, str]]]:
    """Each user message with all of its subject's memories so far, one call each (mem0 v1)."""
    run_id = start_run(engine, "bench.extract_tokens", {"approach": "per_message"}, namespace=namespace)
    gateway = LLMGateway(settings, engine, run_id)
    memories: dict[str, dict[tuple[str, str], dict[str, Any]]] = defaultdict(dict)
    found: set[tuple[str, str, str]] = set()
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
            found.add((message.subject_id, item.key, normalise(item.value)))
        if index % 200 == 0:
            log(f"per-message: {index}/{len(messages)} messages")
    finish_run(engine, run_id, "completed", {"messages": len(messages)})
    with engine.connect() as conn:
        tokens, calls = conn.execute(SELECT_RUN_PROMPT_TOKENS, {"r": run_id}).one()
    return int(tokens), int(calls), found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=7, help="sample seed")
    args = parser.parse_args()

    settings = load_settings()
    settings = settings.model_copy(
        update={"llm_budget_tokens": max(settings.llm_budget_tokens, BENCH_BUDGET_TOKENS)}
    )
    engine = engine_for(settings)
    migrations.upgrade(engine)

    from strataflow.demo.sample import write_sample
    from tasks.ingest import ingest_logs

    namespace = f"bench_extract_{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="strataflow-bench-extract-") as tmp:
        sample_dir = Path(tmp)
        write_sample(sample_dir, seed=args.seed, tz=settings.tz)
        facts = load_facts(sample_dir)
        ingested = ingest_logs(settings, [sample_dir], namespace=namespace, progress=False)
        log(f"ingested {ingested.inserted} messages into {namespace}; {len(facts)} sidecar facts")

    started = time.perf_counter()
    batched_tokens, batched_calls, batched_found = run_batched(settings, engine, namespace)
    log(
        f"batched: {batched_calls} calls, {batched_tokens} prompt tokens "
        f"({time.perf_counter() - started:.1f}s)"
    )
    started = time.perf_counter()
    per_message_tokens, per_message_calls, per_message_found = run_per_message(settings, engine, namespace)
    log(
        f"per-message: {per_message_calls} calls, {per_message_tokens} prompt tokens "
        f"({time.perf_counter() - started:.1f}s)"
    )

    print(
        json.dumps(
            {
                "batched_prompt_tokens": batched_tokens,
                "per_message_prompt_tokens": per_message_tokens,
                "ratio": round(batched_tokens / per_message_tokens, 4) if per_message_tokens else None,
                "recall_batched": recall(facts, batched_found),
                "recall_per_message": recall(facts, per_message_found),
                "batched_calls": batched_calls,
                "per_message_calls": per_message_calls,
                "messages": ingested.inserted,
                "facts": len(facts),
                "model": settings.extract_model,
            }
        )
    )


if __name__ == "__main__":
    main()
