"""A labelled extraction benchmark: `python -m bench.extraction [--model offline|local|MODEL]`.

The cases (bench/extraction_cases.py, bench/data/extraction_*.json) were written for this bench, in English
and Chinese: single facts, several in one message, facts across turns, corrections and updates, negations and
dislikes, other people's facts, hypotheticals, questions, assistant turns, relative dates, numbers and
ranges, small talk; bench.real_model's 22 cases are among them. Each case is one subject (an opaque id) in a
namespace of this run (bench_extraction_<id>); its turns are ingested day by day (strataflow.pipeline.ingest)
and after each day the real stage extracts them (strataflow.pipeline.extract.extract_new, what `strataflow
extract` runs: the real prompt, gateway, answer validation and upsert), so a correction made on a later day
updates the stored item as it would in production.

The model: the configured extract model by default (offline/rules when none is set), `--model offline`,
`--model local` (the packaged model, served by llama.cpp on a free port as `strataflow model serve` serves
it), any litellm model string, or `--api-base URL [--model ID]` for an OpenAI-compatible server already
running.

Printed last, one JSON line: model, cases, en_cases, zh_cases, precision, recall, f1 (the labelled values over
all cases; the matching rule is bench/extraction_cases.py's docstring), update_accuracy, nothing_accuracy,
json_valid (share of the model's answers valid after the gateway's repair turn, from llm_calls),
seconds_per_message (the extraction stage's wall time over the subject's turns), the counts behind them, the
same figures for the held-back quarter under "held_back" and per tag under "by_tag". Progress on stderr;
--dump FILE writes every case's items and score as JSON lines.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from bench.extraction_cases import Case, CaseScore, load_cases, score_case, summary
from bench.model_server import LOCAL, OFFLINE, extraction_settings, log
from strataflow.config import Settings, load_settings
from strataflow.db import migrations
from strataflow.db.engine import engine_for
from strataflow.pipeline.extract import STAGE, extract_new
from strataflow.pipeline.ingest import ingest_logs
from strataflow.pipeline.runs import record_run

FIRST_DAY = datetime(2026, 11, 2, 9, tzinfo=UTC)  # a Monday; the cases' relative dates count from it
DAY_STEP = timedelta(days=7)
SOURCE = "bench_extraction"
SELECT_ITEMS = text(
    """
    select subject_id, kind, key, value, statement from memory_items
    where namespace = :ns and status = 'active' and kind <> 'hot_summary' order by subject_id, kind, key
    """
)
SELECT_ANSWERS = text(
    """
    select subject_id, bool_or(outcome = 'ok') as valid from llm_calls
    where namespace = :ns and stage = :stage group by run_id, subject_id, input_hash
    """
)


def subject_of(case: Case) -> str:
    """An opaque subject id, as users send them."""
    return "u" + hashlib.sha256(case.id.encode()).hexdigest()[:10]


def day_records(cases: list[Case], day: int) -> list[dict[str, Any]]:
    """The canonical messages of every case's turns on one day."""
    records = []
    for case in cases:
        if day >= len(case.days):
            continue
        previous = sum(len(d) for d in case.days[:day])
        for index, turn in enumerate(case.days[day]):
            records.append({
                "conversation_id": f"c-{subject_of(case)}", "subject_id": subject_of(case),
                "source_message_id": f"{case.id}-{previous + index}", "role": turn.role, "content": turn.text,
                "created_at": (FIRST_DAY + day * DAY_STEP + timedelta(minutes=index)).isoformat(),
            })  # fmt: skip
    return records


def run_days(settings: Settings, engine: Engine, namespace: str, cases: list[Case]) -> float:
    """Ingest and extract the cases day by day; returns the extraction stage's seconds."""
    seconds = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for day in range(max(len(case.days) for case in cases)):
            path = Path(tmp) / f"day{day + 1}.jsonl"
            lines = (json.dumps(r, ensure_ascii=False) for r in day_records(cases, day))
            path.write_text("\n".join(lines) + "\n", encoding="utf-8")
            ingest_logs(settings, [path], namespace=namespace, source=SOURCE, progress=False)
            started = time.monotonic()
            result = record_run(
                engine, "extract", {"namespace": namespace, "bench": "extraction", "day": day + 1}, namespace,
                lambda run_id: extract_new(settings, run_id=run_id, namespace=namespace, progress=False),
            )  # fmt: skip
            seconds += time.monotonic() - started
            log(
                f"day {day + 1}: {result.scopes} subjects, {result.messages} messages, "
                f"{result.llm_calls} calls, "
                f"{result.items_new} new / {result.items_changed} changed items, {len(result.errors)} errors "
                f"({time.monotonic() - started:.1f}s)"
            )
    return seconds


def read_items(engine: Engine, namespace: str) -> dict[str, list[dict[str, Any]]]:
    items: dict[str, list[dict[str, Any]]] = {}
    with engine.connect() as conn:
        for row in conn.execute(SELECT_ITEMS, {"ns": namespace}):
            items.setdefault(row.subject_id, []).append(
                {"kind": row.kind, "key": row.key, "value": row.value, "statement": row.statement or ""}
            )
    return items


def json_valid(engine: Engine, namespace: str, subjects: set[str]) -> tuple[float, int]:
    """Share of the model's answers (one per piece of work, retries and the repair turn included) that ended
    valid, and how many answers there were."""
    with engine.connect() as conn:
        rows = [
            r
            for r in conn.execute(SELECT_ANSWERS, {"ns": namespace, "stage": STAGE})
            if r.subject_id in subjects
        ]
    return (round(sum(r.valid for r in rows) / len(rows), 4) if rows else 1.0), len(rows)


def figures(
    scores: list[CaseScore], engine: Engine, namespace: str, subjects: dict[str, str]
) -> dict[str, Any]:
    share, answers = json_valid(engine, namespace, {subjects[s.case.id] for s in scores})
    return {**summary(scores), "json_valid": share, "answers": answers}


def by_tag(scores: list[CaseScore]) -> dict[str, dict[str, Any]]:
    """Per tag: the cases and the figures that apply to them (no precision where nothing was produced, no
    recall without labelled values, ...)."""
    out: dict[str, dict[str, Any]] = {}
    for tag in sorted({tag for s in scores for tag in s.case.tags}):
        figures = summary([s for s in scores if tag in s.case.tags])
        out[tag] = {"cases": figures["cases"]}
        for name, count in (
            ("precision", "values_produced"),
            ("recall", "values_labelled"),
            ("update_accuracy", "update_cases"),
            ("nothing_accuracy", "nothing_cases"),
        ):
            if figures[count]:
                out[tag][name] = figures[name]
    return out


def dump(
    path: Path, scores: list[CaseScore], items: dict[str, list[dict[str, Any]]], subjects: dict[str, str]
) -> None:
    with path.open("w", encoding="utf-8") as out:
        for s in scores:
            kept = items.get(subjects[s.case.id], [])
            record = {
                "id": s.case.id, "held_back": s.case.held_back, "tags": s.case.tags,
                "turns": [t.text for day in s.case.days for t in day],
                "items": [{k: i[k] for k in ("kind", "key", "value")} for i in kept],
                "right": s.right, "wrong": s.wrong, "missed": s.missed,
                "update_ok": s.update_ok, "nothing_ok": s.nothing_ok,
            }  # fmt: skip
            out.write(json.dumps(record, ensure_ascii=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help=f"'{OFFLINE}', '{LOCAL}', a litellm model, or with --api-base its id")
    parser.add_argument("--api-base", help="an OpenAI-compatible server already running")
    parser.add_argument("--threads", type=int, help="llama.cpp threads, --model local (default: every core)")
    parser.add_argument("--cases", help="only the cases whose id matches this regex (a partial run)")
    parser.add_argument("--dump", type=Path, help="write each case's items and score here (JSON lines)")
    args = parser.parse_args()
    settings = load_settings()
    engine = engine_for(settings)
    migrations.upgrade(engine)
    cases = [c for c in load_cases() if not args.cases or re.search(args.cases, c.id)]
    if not cases:
        raise SystemExit(f"no case id matches {args.cases!r}")
    namespace = f"bench_extraction_{uuid.uuid4().hex[:8]}"
    subjects = {case.id: subject_of(case) for case in cases}
    with extraction_settings(settings, args.model, args.api_base, args.threads) as chosen:
        turns = sum(len(c.user_turns()) for c in cases)
        log(f"{len(cases)} cases ({turns} user turns) with {chosen.extract_model} into {namespace} ...")
        seconds = run_days(chosen, engine, namespace, cases)
    items = read_items(engine, namespace)
    scores = [score_case(case, items.get(subjects[case.id], [])) for case in cases]
    if args.dump:
        dump(args.dump, scores, items, subjects)
    held = [s for s in scores if s.case.held_back]
    print(json.dumps({
        "model": chosen.extract_model,
        **figures(scores, engine, namespace, subjects),
        "seconds_per_message": round(seconds / turns, 3),
        "held_back": figures(held, engine, namespace, subjects),
        "by_tag": by_tag(scores),
        "partial": bool(args.cases),
    }, ensure_ascii=False))  # fmt: skip


if __name__ == "__main__":
    main()
