"""Paraphrased fact recall in English and Chinese: `python -m bench.facts [--split S] [--dump PATH]`.

The project's own fact sets (bench/data/facts_en.json, facts_zh.json: invented people, five or six facts
each, one question per fact in other words than the fact, with negations and near-misses; see the files'
`about`) are stored as L2 entries, each fact through `strataflow.memory.api.create_memory` as POST
/v1/memories and /mem0 add(infer=False) store one (type `user`, the text as its name, embedded on write),
one namespace per language, a subject per person. Every question is then asked through
`strataflow.retrieval.item_search.search_memories`, the memory search of the API, /mem0 and MCP, with the
question's subject, and counts when the right fact comes first (top-1). The unrelated queries of both files
(questions no stored fact answers) are asked of every subject: the best score any of them gets is
`max_unrelated_score`, to be below `min_right_score` (the lowest score of a right fact over all questions),
so that one threshold keeps every right answer and drops every unrelated one.

The baseline, in the same run and on the same data: plain cosine over the default embedder
(settings.embedding_model, encoded directly, no database), the question against the subject's facts.

A subject's `split` is fit (its questions may be used to fit ranking weights) or holdout (validation only);
`--split` keeps one of them, and with `all` (the default) the holdout figures are printed as well
(`holdout_*`). `--dump PATH` writes one JSON line per asked (question or unrelated query, subject): every
fact of the subject with its rank and score from the search, the ranking's own features (its metadata),
the cosine under each embedding model and the lexical overlap, for fitting weights offline.

Runs on a fresh STRATAFLOW_HOME (creates and migrates its database) and writes only its namespaces
`bench_facts_<run>_<lang>` (and `bench_facts_<run>_shapes`: bench.facts_shapes, the agent shapes, printed as
"shapes" and "holdout_shapes"; `--shapes-only` asks them alone). One JSON line last on stdout.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.facts_shapes import ask_explained, run_shapes

DATA = Path(__file__).parent / "data"
LANGS = ("en", "zh")
LIMIT = (
    10  # hits asked per search: more than any subject's facts, so a right fact that is reached has a score
)


@dataclass(frozen=True)
class Subject:
    lang: str
    subject: str
    split: str
    facts: tuple[str, ...]
    questions: tuple[str, ...]
    tags: tuple[tuple[str, ...], ...]


@dataclass
class Tally:
    """One language's (or the holdout's) figures while the run goes."""

    cases: int = 0
    top1: int = 0
    baseline_top1: int = 0
    right_scores: list[float] = field(default_factory=list)
    unrelated_scores: list[float] = field(default_factory=list)
    by_tag: dict[str, list[int]] = field(default_factory=dict)  # tag -> [cases, top1]


def load_subjects(split: str, data: Path = DATA) -> tuple[list[Subject], dict[str, list[str]]]:
    """The subjects of both files (those of `split`, or all) and each file's unrelated queries."""
    subjects: list[Subject] = []
    unrelated: dict[str, list[str]] = {}
    for lang in LANGS:
        doc = json.loads((data / f"facts_{lang}.json").read_text(encoding="utf-8"))
        unrelated[lang] = list(doc["unrelated"])
        for entry in doc["subjects"]:
            if split != "all" and entry["split"] != split:
                continue
            facts = entry["facts"]
            subjects.append(
                Subject(
                    lang=lang,
                    subject=entry["subject"],
                    split=entry["split"],
                    facts=tuple(f["fact"] for f in facts),
                    questions=tuple(f["question"] for f in facts),
                    tags=tuple(tuple(f.get("tags", ())) for f in facts),
                )
            )
    return subjects, unrelated


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def store_facts(engine: Any, settings: Any, namespace: str, subject: Subject) -> dict[int, int]:
    """Store the subject's facts as POST /v1/memories and /mem0 add(infer=False) do; item id -> fact index."""
    from strataflow.adapters.mem0 import ENTRY_TYPE
    from strataflow.adapters.mem0_names import mem0_entry_name as entry_name
    from strataflow.memory import api

    ids: dict[int, int] = {}
    with engine.begin() as conn:
        for index, fact in enumerate(subject.facts):
            written = api.create_memory(
                conn, namespace, subject.subject, ENTRY_TYPE, entry_name(fact), fact, settings=settings
            )
            ids[written.item.id] = index
    return ids


def ask(engine: Any, settings: Any, namespace: str, subject: str, query: str) -> list[tuple[int, float]]:
    """(item id, score) best first, from the memory search every surface uses."""
    from strataflow.retrieval.item_search import search_memories

    with engine.connect() as conn:
        hits = search_memories(conn, settings, namespace, query, subject, limit=LIMIT)
    return [(hit.id, float(hit.score)) for hit in hits]


def features(
    engine: Any, settings: Any, namespace: str, subject: str, query: str
) -> dict[int, dict[str, Any]]:
    """item id -> the ranking's metadata for that item (its features: bm25, dense, ...), for --dump."""
    from strataflow.retrieval.search import search

    with engine.connect() as conn:
        hits = search(conn, settings, namespace, query, subject_id=subject, layers=("items",), k=LIMIT)
    return {
        hit.id: {
            k: v for k, v in hit.metadata.items() if isinstance(v, int | float) and not isinstance(v, bool)
        }
        for hit in hits
    }


def lexical_overlap(query: str, fact: str) -> float:
    """Share of the query's full-text words (English words, jieba tokens) that the fact also has."""
    from strataflow.textsearch import or_query_parts

    def words(text: str) -> set[str]:
        en, zh = or_query_parts(text)
        return {w for part in (en, zh) for w in part.split(" | ") if w}

    wanted = words(query)
    return len(wanted & words(fact)) / len(wanted) if wanted else 0.0


def encoders(settings: Any) -> dict[str, Callable[[Sequence[str], bool], np.ndarray]]:
    """Embedding models to compare in --dump: name -> encode(texts, is_query) (L2-normalised rows)."""
    from strataflow.llm.embeddings import get_embedder

    default = get_embedder(settings)
    return {default.model_name: lambda texts, is_query: default.encode(list(texts))}


def baseline_top1(settings: Any, subjects: Sequence[Subject]) -> dict[tuple[str, int], int]:
    """Plain cosine over the default embedder: (subject, question index) -> the best fact's index."""
    from strataflow.llm.embeddings import get_embedder

    embedder = get_embedder(settings)
    best: dict[tuple[str, int], int] = {}
    for subject in subjects:
        facts = embedder.encode(list(subject.facts))
        questions = embedder.encode(list(subject.questions))
        for i, row in enumerate(questions @ facts.T):
            best[(subject.subject, i)] = int(np.argmax(row))
    return best


def summary(tally: Tally) -> dict[str, Any]:
    """The figures of one tally (top-1 shares and score statistics)."""
    out: dict[str, Any] = {
        "cases": tally.cases,
        "top1": round(tally.top1 / tally.cases, 4) if tally.cases else 0.0,
        "baseline_top1": round(tally.baseline_top1 / tally.cases, 4) if tally.cases else 0.0,
    }
    if tally.right_scores:
        right = sorted(tally.right_scores)
        out.update(
            right_score_min=round(right[0], 4),
            right_score_p10=round(right[len(right) // 10], 4),
            right_score_median=round(statistics.median(right), 4),
        )
    if tally.unrelated_scores:
        unrelated = sorted(tally.unrelated_scores)
        out.update(
            unrelated_score_max=round(unrelated[-1], 4),
            unrelated_score_p90=round(unrelated[int(len(unrelated) * 0.9)], 4),
            unrelated_score_median=round(statistics.median(unrelated), 4),
        )
    for tag, (cases, top1) in sorted(tally.by_tag.items()):
        out[f"{tag}_top1"] = round(top1 / cases, 4)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("fit", "holdout", "all"), default="all", help="Subjects to use.")
    parser.add_argument("--dump", type=Path, help="Write every candidate's features as JSON lines here.")
    parser.add_argument(
        "--data", type=Path, default=DATA, help="Folder with facts_en.json and facts_zh.json."
    )
    parser.add_argument("--shapes-only", action="store_true", help="Ask the agent shapes only (quick).")
    parser.add_argument("--skip-shapes", action="store_true", help="Ask the two fact sets only.")
    args = parser.parse_args(argv)
    started = time.perf_counter()

    from strataflow.config import load_settings
    from strataflow.db import migrations
    from strataflow.db.engine import engine_for

    settings = load_settings()
    engine = engine_for(settings)
    migrations.upgrade(engine)
    run = uuid.uuid4().hex[:8]
    dump = args.dump.open("w", encoding="utf-8") if args.dump else None
    shapes, shape_misses = (
        ({}, []) if args.skip_shapes else run_shapes(engine, settings, run, args.split, args.data, dump)
    )
    for miss in shape_misses:
        log(f"shape miss: {miss}")
    if args.shapes_only:
        if dump:
            dump.close()
        print(json.dumps({"split": args.split, **shapes}, ensure_ascii=False))
        return
    subjects, unrelated = load_subjects(args.split, args.data)
    namespaces = {lang: f"bench_facts_{run}_{lang}" for lang in LANGS}
    ids: dict[str, dict[int, int]] = {}
    for subject in subjects:
        ids[subject.subject] = store_facts(engine, settings, namespaces[subject.lang], subject)
    log(f"stored {sum(len(s.facts) for s in subjects)} facts of {len(subjects)} subjects in {namespaces}")
    baseline = baseline_top1(settings, subjects)
    models = encoders(settings) if args.dump else {}

    tallies = {key: Tally() for key in (*LANGS, *(f"holdout_{lang}" for lang in LANGS))}
    misses: list[str] = []
    for subject in subjects:
        namespace = namespaces[subject.lang]
        fact_of = ids[subject.subject]
        kept = [tallies[subject.lang]] + (
            [tallies[f"holdout_{subject.lang}"]] if subject.split == "holdout" else []
        )
        for i, question in enumerate(subject.questions):
            explained = ask_explained(engine, settings, namespace, subject.subject, question) if dump else []
            hits = (
                [(i, s) for i, s, _ in explained]
                if dump
                else ask(engine, settings, namespace, subject.subject, question)
            )
            right = next((score for item, score in hits if fact_of.get(item) == i), 0.0)
            first = bool(hits) and fact_of.get(hits[0][0]) == i
            for tally in kept:
                tally.cases += 1
                tally.top1 += first
                tally.baseline_top1 += baseline[(subject.subject, i)] == i
                tally.right_scores.append(right)
                for tag in subject.tags[i]:
                    counts = tally.by_tag.setdefault(tag, [0, 0])
                    counts[0] += 1
                    counts[1] += first
            if not first:
                got = subject.facts[fact_of[hits[0][0]]] if hits else "nothing"
                misses.append(f"{subject.subject}: {question} -> {got}")
            if dump:
                record = {"kind": "case", "lang": subject.lang, "split": subject.split, "right": i}
                _dump(
                    dump, record, engine, settings, namespace, subject, question, explained, fact_of, models
                )
        for lang in LANGS:
            for query in unrelated[lang]:
                explained = ask_explained(engine, settings, namespace, subject.subject, query) if dump else []
                hits = (
                    [(i, s) for i, s, _ in explained]
                    if dump
                    else ask(engine, settings, namespace, subject.subject, query)
                )
                top = hits[0][1] if hits else 0.0
                tallies[lang].unrelated_scores.append(top)
                if subject.split == "holdout":
                    tallies[f"holdout_{subject.lang}"].unrelated_scores.append(top)
                if dump:
                    record = {"kind": "unrelated", "lang": lang, "split": subject.split, "right": None}
                    _dump(
                        dump, record, engine, settings, namespace, subject, query, explained, fact_of, models
                    )
        log(f"{subject.subject}: {len(subject.questions)} questions asked, unrelated queries asked")
    if dump:
        dump.close()
    for miss in misses:
        log(f"miss: {miss}")
    out = figures(tallies, args.split, settings, time.perf_counter() - started)
    print(json.dumps({**out, **shapes}, ensure_ascii=False))


def figures(tallies: dict[str, Tally], split: str, settings: Any, seconds: float) -> dict[str, Any]:
    """The one JSON line: the check's keys first, then per-language statistics."""
    out: dict[str, Any] = {"split": split, "model": settings.embedding_model}
    everything = Tally()
    for lang in LANGS:
        s = summary(tallies[lang])
        out[f"{lang}_cases"] = s.pop("cases")
        out[f"{lang}_top1"] = s.pop("top1")
        out[f"baseline_{lang}_top1"] = s.pop("baseline_top1")
        out.update({f"{lang}_{key}": value for key, value in s.items()})
        everything.right_scores += tallies[lang].right_scores
        everything.unrelated_scores += tallies[lang].unrelated_scores
    out["min_right_score"] = round(min(everything.right_scores, default=0.0), 4)
    out["max_unrelated_score"] = round(max(everything.unrelated_scores, default=0.0), 4)
    if split == "all":
        held = Tally()
        for lang in LANGS:
            tally = tallies[f"holdout_{lang}"]
            s = summary(tally)
            out[f"holdout_{lang}_cases"] = s["cases"]
            out[f"holdout_{lang}_top1"] = s["top1"]
            out[f"holdout_baseline_{lang}_top1"] = s["baseline_top1"]
            held.right_scores += tally.right_scores
            held.unrelated_scores += tally.unrelated_scores
        out["holdout_min_right_score"] = round(min(held.right_scores, default=0.0), 4)
        out["holdout_max_unrelated_score"] = round(max(held.unrelated_scores, default=0.0), 4)
    out["seconds"] = round(seconds, 1)
    return out


def _dump(
    out: Any,
    record: dict[str, Any],
    engine: Any,
    settings: Any,
    namespace: str,
    subject: Subject,
    query: str,
    explained: list[tuple[int, float, dict[str, float]]],
    fact_of: dict[int, int],
    models: dict[str, Callable[[Sequence[str], bool], np.ndarray]],
) -> None:
    """One JSON line: the query and every fact of its subject with its search result (`explained`: item,
    score and the parts of its logit, what bench.fit_ranking fits the calibrations and weights on) and
    features."""
    meta = features(engine, settings, namespace, subject.subject, query)
    hits = [(item, score) for item, score, _ in explained]
    parts = {item: why for item, _, why in explained}
    place = {fact_of[item]: (rank, score, item) for rank, (item, score) in enumerate(hits, start=1)}
    item_of = {index: item for item, index in fact_of.items()}
    cosines = {name: (_vectors(encode, subject.facts, False) @ _vectors(encode, (query,), True)[0]).tolist()
               for name, encode in models.items()}  # fmt: skip
    candidates = []
    for index, fact in enumerate(subject.facts):
        rank, score, _ = place.get(index, (None, 0.0, None))
        candidates.append(
            {
                "fact": index,
                "text": fact,
                "right": index == record["right"],
                "rank": rank,
                "score": score,
                "ranking": meta.get(item_of[index], {}),
                "parts": parts.get(item_of[index], {}),
                "cosine": {name: round(values[index], 5) for name, values in cosines.items()},
                "lexical": round(lexical_overlap(query, fact), 4),
            }
        )
    from strataflow.retrieval.ranking import CALIBRATION

    calibration = {name: [cal.center, cal.slope] for name, cal in CALIBRATION.items()}
    record.update(subject=subject.subject, subject_lang=subject.lang, query=query, calibration=calibration)
    record.update(candidates=candidates)
    out.write(json.dumps(record, ensure_ascii=False) + "\n")


_VECTORS: dict[tuple[int, tuple[str, ...], bool], np.ndarray] = {}


def _vectors(
    encode: Callable[[Sequence[str], bool], np.ndarray], texts: tuple[str, ...], is_query: bool
) -> np.ndarray:
    """encode(texts, is_query), once per run (--dump compares every query with its subject's facts)."""
    key = (id(encode), texts, is_query)
    if key not in _VECTORS:
        _VECTORS[key] = encode(texts, is_query)
    return _VECTORS[key]


if __name__ == "__main__":
    main()
