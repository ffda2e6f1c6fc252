"""bench.facts' agent shapes: first-person facts under opaque subject ids, each asked three ways.

bench/data/facts_shapes.json: invented people stored under opaque ids (``u3c81f0a2``, as agents store their
users), their facts told in the first person ("I work night shifts as a radiographer"), English and Chinese;
each fact asked as self (the user about themselves: "What is my job?"), agent (the agent about the user:
"What does the user do for a living?", 用户的职业是什么？) and cross (the user's question in the other
language). Every fact is stored and searched as bench.facts' own (`store_facts`, `ask`); per shape the
figures are cases, top1 (the right fact first), right_above_0_5 (share of right facts scoring >= 0.5) and
e5_top1: plain multilingual-e5-small cosine (query and passage prefixes) over every text, same data, same run.

With bench.facts' `--dump`, every question's hits (and those of both fact files' unrelated queries, asked of
every shape subject) are written with their score's parts (explain) as JSON lines of kind "shape" and
"shape_unrelated": what bench.fit_ranking fits the cross-language calibration on.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

SHAPES = ("self", "agent", "cross")
FILE = "facts_shapes.json"


@dataclass(frozen=True)
class ShapeSubject:
    lang: str
    subject: str
    split: str
    facts: tuple[str, ...]
    questions: dict[str, tuple[str, ...]]  # shape -> one question per fact


def load_shape_subjects(split: str, data: Path) -> list[ShapeSubject]:
    """The subjects of facts_shapes.json (those of `split`, or all)."""
    doc = json.loads((data / FILE).read_text(encoding="utf-8"))
    return [
        ShapeSubject(
            lang=entry["lang"],
            subject=entry["subject"],
            split=entry["split"],
            facts=tuple(f["fact"] for f in entry["facts"]),
            questions={shape: tuple(f[shape] for f in entry["facts"]) for shape in SHAPES},
        )
        for entry in doc["subjects"]
        if split == "all" or entry["split"] == split
    ]


def e5_best(settings: Any, subject: ShapeSubject) -> dict[str, list[int]]:
    """Plain multilingual-e5-small cosine: shape -> the best fact's index for each question."""
    from strataflow.llm.embeddings import E5_MODEL_NAME, get_embedder

    e5 = get_embedder(settings, E5_MODEL_NAME)
    facts = e5.encode(list(subject.facts))
    return {
        shape: [int(np.argmax(row)) for row in e5.encode_queries(list(questions)) @ facts.T]
        for shape, questions in subject.questions.items()
    }


def ask_explained(
    engine: Any, settings: Any, namespace: str, subject: str, query: str
) -> list[tuple[int, float, dict[str, float]]]:
    """(item id, score, the score's logit parts) best first: bench.facts' `ask` with explain."""
    from bench.facts import LIMIT
    from strataflow.retrieval.item_search import search_memories

    with engine.connect() as conn:
        hits = search_memories(conn, settings, namespace, query, subject, limit=LIMIT, explain=True)
    return [(hit.id, float(hit.score), dict(hit.explain.parts) if hit.explain else {}) for hit in hits]


def _dump_line(
    dump: Any, kind: str, subject: ShapeSubject, shape: str | None, query: str, right: int | None,
    hits: list[tuple[int, float, dict[str, float]]], fact_of: dict[int, int],
) -> None:  # fmt: skip
    """One JSON line for bench.fit_ranking: the query, its subject and each hit's fact, score and parts."""
    from strataflow.retrieval.ranking import CALIBRATION

    record = {
        "kind": kind, "split": subject.split, "subject": subject.subject, "subject_lang": subject.lang,
        "shape": shape, "query": query, "right": right,
        "calibration": {name: [cal.center, cal.slope] for name, cal in CALIBRATION.items()},
        "hits": [{"fact": fact_of.get(item), "text": subject.facts[fact_of[item]], "score": score,
                  "parts": parts} for item, score, parts in hits if item in fact_of],
    }  # fmt: skip
    dump.write(json.dumps(record, ensure_ascii=False) + "\n")


def run_shapes(
    engine: Any, settings: Any, run: str, split: str, data: Path, dump: Any = None
) -> tuple[dict[str, Any], list[str]]:
    """Store and ask every shape subject; the "shapes" figures (and, with split all, "holdout_shapes") and
    the misses. `dump` (an open file): every search's hits with their parts, for bench.fit_ranking."""
    from bench.facts import Subject, ask, store_facts

    counts = {key: {s: [0, 0, 0, 0] for s in SHAPES} for key in ("all", "holdout")}  # cases top1 e5 above
    misses: list[str] = []
    for subject in load_shape_subjects(split, data):
        namespace = f"bench_facts_{run}_shapes"
        plain = Subject(subject.lang, subject.subject, subject.split, subject.facts, (), ())
        fact_of = store_facts(engine, settings, namespace, plain)
        e5 = e5_best(settings, subject)
        for shape, questions in subject.questions.items():
            for i, question in enumerate(questions):
                if dump is None:
                    hits = ask(engine, settings, namespace, subject.subject, question)
                else:
                    explained = ask_explained(engine, settings, namespace, subject.subject, question)
                    _dump_line(dump, "shape", subject, shape, question, i, explained, fact_of)
                    hits = [(item, score) for item, score, _ in explained]
                right = next((score for item, score in hits if fact_of.get(item) == i), 0.0)
                first = bool(hits) and fact_of.get(hits[0][0]) == i
                for key in ("all", "holdout") if subject.split == "holdout" else ("all",):
                    tally = counts[key][shape]
                    tally[0] += 1
                    tally[1] += first
                    tally[2] += e5[shape][i] == i
                    tally[3] += right >= 0.5
                if not first or right < 0.5:
                    got = subject.facts[fact_of[hits[0][0]]] if hits else "nothing"
                    misses.append(f"{shape} {subject.subject}: {question} -> {got} (right {right:.3f})")
        if dump is not None:
            for query in unrelated_queries(data):
                explained = ask_explained(engine, settings, namespace, subject.subject, query)
                _dump_line(dump, "shape_unrelated", subject, None, query, None, explained, fact_of)
    out: dict[str, Any] = {}
    for key, name in (("all", "shapes"), ("holdout", "holdout_shapes")):
        if key == "holdout" and split != "all":
            continue
        out[name] = {
            shape: {
                "cases": c[0],
                "top1": round(c[1] / c[0], 4) if c[0] else 0.0,
                "e5_top1": round(c[2] / c[0], 4) if c[0] else 0.0,
                "right_above_0_5": round(c[3] / c[0], 4) if c[0] else 0.0,
            }
            for shape, c in counts[key].items()
        }
    return out, misses


def unrelated_queries(data: Path) -> list[str]:
    """The unrelated queries of both fact files (questions no stored fact answers), English and Chinese."""
    return [
        q
        for lang in ("en", "zh")
        for q in json.loads((data / f"facts_{lang}.json").read_text("utf-8"))["unrelated"]
    ]
