"""LoCoMo dialog recall of strataflow's retrieval: `python -m bench.locomo --data PATH [--ks 5,10,25,50]`.

Each conversation goes through the real pipeline: `tasks.ingest.ingest_logs(fmt="locomo")` into a namespace of
its own, `tasks.embed.embed_pending`, then every question is asked through
`strataflow.retrieval.search.search` over L1 messages. Dialog recall as in the LoCoMo paper: per question, the
share of its evidence turns found in the top k (a question without evidence counts as 1), averaged, in
percent, overall and per category.

For reference (LoCoMo paper, Table 3, DRAGON): 56.7 / 66.2 / 76.7 / 82.7 at k = 5 / 10 / 25 / 50.

What was measured on locomo_dev3 (497 questions; k = 5 / 10 / 25 / 50) on the way to
strataflow.retrieval.ranking (a prototype with the same recipes in numpy; the last line is this bench through
the database):
  dense MiniLM, content only                                 19.8 / 28.0 / 44.4 / 60.8
  dense, "speaker: content"                                  36.7 / 47.8 / 61.7 / 72.4
  dense, previous turn + turn                                42.5 / 52.7 / 65.5 / 75.6
  BM25, content only                                         52.6 / 60.2 / 67.6 / 71.8
  BM25, + speaker and image caption                          56.4 / 63.5 / 71.0 / 76.5
  RRF(dense speaker, BM25 speaker) (the "simple hybrid")     49.4 / 58.7 / 73.3 / 83.7
  BM25 over a +-1 turn window                                63.4 / 73.3 / 80.1 / 85.9
  BM25 over a +-2 turn window, own turn x2                   69.9 / 77.9 / 86.1 / 90.0
  + dense (content, +-1 neighbour x0.5), min-max 0.6/0.4     72.4 / 81.0 / 88.9 / 92.1
    (halves of the questions: 72.8 / 81.6 / 89.5 / 91.9 and 71.9 / 80.4 / 88.2 / 92.2)
  same with RRF instead of min-max fusion                    62.1 / 73.6 / 86.8 / 91.5
  this bench (PostgreSQL stemming and stopwords)             73.3 / 82.3 / 88.8 / 92.3
Prints one JSON line last: {"recall": {"5": pct, ...}, "by_category": {"1": {"5": pct, ...}, ...},
"questions": N, "conversations": C, "seconds": S}.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

TURN_ID = re.compile(r"D(\d+):(\d+)")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def turn_ids(value: str) -> set[tuple[int, int]]:
    """(session, turn) pairs named in a dia_id or an evidence string ("D8:6; D9:17" names two)."""
    return {(int(a), int(b)) for a, b in TURN_ID.findall(value or "")}


def namespace_for(sample_id: str) -> str:
    return "bench_locomo_" + re.sub(r"[^a-z0-9]+", "_", sample_id.lower()).strip("_")


def load_conversation(settings: Any, sample: dict[str, Any], workdir: Path) -> str:
    """Ingest and embed one conversation into its own namespace through the real stages; returns it."""
    from tasks.embed import embed_pending
    from tasks.ingest import ingest_logs

    namespace = namespace_for(str(sample["sample_id"]))
    path = workdir / f"{namespace}.json"
    path.write_text(json.dumps([sample]), encoding="utf-8")
    ingested = ingest_logs(settings, [path], namespace=namespace, fmt="locomo", progress=False)
    embedded = embed_pending(settings, progress=False, namespace=namespace)
    log(
        f"{sample['sample_id']}: ingested {ingested.inserted} (read {ingested.read}, quarantined "
        f"{ingested.quarantined}), embedded {embedded.conversation_messages}"
    )
    return namespace


def question_recall(evidence: list[str], found: list[tuple[int, int]], ks: list[int]) -> dict[int, float]:
    wanted = set().union(*(turn_ids(e) for e in evidence)) if evidence else set()
    if not wanted:
        return {k: 1.0 for k in ks}
    return {k: len(wanted & set(found[:k])) / len(wanted) for k in ks}


def run(data: Path, ks: list[int]) -> dict[str, Any]:
    from strataflow.config import load_settings
    from strataflow.db import migrations
    from strataflow.db.engine import engine_for
    from strataflow.llm.embeddings import get_embedder
    from strataflow.retrieval.search import search

    started = time.perf_counter()
    settings = load_settings()
    engine = engine_for(settings)
    migrations.upgrade(engine)
    samples = json.loads(data.read_text(encoding="utf-8"))
    samples = samples if isinstance(samples, list) else [samples]
    embedder = get_embedder(settings)
    totals: dict[int, float] = defaultdict(float)
    by_category: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    per_category: dict[str, int] = defaultdict(int)
    questions = 0
    with tempfile.TemporaryDirectory(prefix="locomo-") as tmp:
        for sample in samples:
            namespace = load_conversation(settings, sample, Path(tmp))
            qa = [q for q in sample.get("qa", []) if q.get("question")]
            vectors = embedder.encode([q["question"] for q in qa])
            with engine.connect() as conn:
                for q, vector in zip(qa, vectors, strict=True):
                    hits = search(
                        conn,
                        settings,
                        namespace,
                        q["question"],
                        layers=("messages",),
                        k=max(ks),
                        query_embedding=vector,
                    )
                    found = [
                        next(iter(turn_ids(str(h.metadata.get("source_message_id")))), (-1, -1)) for h in hits
                    ]
                    recall = question_recall([str(e) for e in q.get("evidence") or []], found, ks)
                    category = str(q.get("category", "none"))
                    per_category[category] += 1
                    questions += 1
                    for k in ks:
                        totals[k] += recall[k]
                        by_category[category][k] += recall[k]
            log(f"{sample['sample_id']}: {len(qa)} questions asked")
    pct = lambda value, n: round(100.0 * value / max(n, 1), 1)  # noqa: E731
    return {
        "recall": {str(k): pct(totals[k], questions) for k in ks},
        "by_category": {
            c: {**{str(k): pct(v[k], per_category[c]) for k in ks}, "questions": per_category[c]}
            for c, v in sorted(by_category.items())
        },
        "questions": questions,
        "conversations": len(samples),
        "seconds": round(time.perf_counter() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--data", type=Path, required=True, help="a LoCoMo JSON file (a list of conversations)"
    )
    parser.add_argument("--ks", default="5,10,25,50", help="comma-separated cut-offs (default 5,10,25,50)")
    args = parser.parse_args(argv)
    if not args.data.exists():
        parser.error(f"--data {args.data}: no such file")
    ks = sorted({int(k) for k in args.ks.split(",") if k.strip()})
    print(json.dumps(run(args.data, ks)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
