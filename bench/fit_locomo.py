"""LoCoMo's labelled scores for bench.fit_ranking: the dialog weights as the output of a search over them.

`labelled(dump)` reads a `python -m bench.locomo --dump PATH` pickle (bench.locomo_dump: every ranking call of
every question, with the candidates the library scored) and keeps, per question, only numbers and ids (LoCoMo
is CC BY-NC: no dialog or question text is stored): its conversation, split (fit: the even-numbered questions
in file order, holdout: the odd ones, as docs/retrieval-quality.md's half/half), category, evidence turns,
and per candidate turn the inputs of its logit that the weights do not change: the dense logit (the parts
dense + neighbours + subject), the coverage and the evidence flags (speaker, time, period). Every item and
report of the conversation is kept with its cosine, subject part, coverage and evidence flags (they are
ranked like any row before they lift turns), so the lineage is computed again under the weights tried.
Turns kept per question: the best ``POOL`` under the weights the dump was made with, and every evidence turn
(a weight that lifts a turn from below ``POOL`` into the top 50 is not seen; ``POOL`` 100 and every turn
chose the same weights on the 2026-12-07 dump).

`prepare(data, calibration, entry_lexical)` holds the questions as arrays, and `recall(prepared, split,
weights)` replays the ranking (items and reports scored and the best lifting their turns, then z = dense +
lexical x coverage + speaker + time + period + min(lineage, lift_max), hits ordered by their rounded score
and id: strataflow.retrieval.ranking.rank, layered.lineage_lift and search) and gives LoCoMo's dialog recall
per category at k, the database run's to the decimal; `criterion` is the half/half criterion fixed
beforehand (docs/retrieval-quality.md): the sum over categories and k of min(ours - DRAGON, 5), overall
counted against DRAGON + 8. `fit_weights` is a coordinate search over ``GRID`` from the weights in use: a
weight moves to another grid value only when that raises the criterion on the fit half by at least its
resolution (`resolution`: what one question of the largest category moves it at one k, 100 / 99 = 1.0 on
the committed half; a smaller gain is fewer than one question, and such moves, taken one after another,
traded multi-hop and temporal recall at k = 5 for adversarial and k = 50 on the 2026-12-07 dump: speaker
1.6 -> 0.8 and item 0.8 -> 2.4 raised the fit half 0.6 and cost holdout multi-hop 4.7 points at k = 5),
until a pass moves nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.locomo import DRAGON, DRAGON_KS, turn_ids
from strataflow.retrieval.layered import ITEM_TOP, REPORT_TOP
from strataflow.retrieval.ranking import DenseCalibration, RankingWeights
from strataflow.retrieval.search import SCORE_DIGITS

POOL = 100
POOL_COLUMNS = ("turn", "dense", "coverage", "flags")
KS = DRAGON_KS
SPEAKER, TIME, PERIOD = 1, 2, 4  # evidence flags
# The weights the search may move and the values it tries (logits: steps of 0.4 = 0.05 of MiniLM cosine).
GRID: dict[str, tuple[float, ...]] = {
    "lexical": (3.2, 4.0, 4.8, 5.6, 6.4),
    "speaker": (0.8, 1.2, 1.6, 2.0, 2.4),
    "time": (0.0, 0.4, 0.8, 1.2),
    "period": (0.0, 0.8, 1.6, 2.4),
    "item": (0.0, 0.4, 0.8, 1.6, 2.4),
    "report": (0.0, 0.8, 1.2, 1.6, 2.4),
}


def labelled(path: Path) -> dict[str, Any]:
    """The labelled scores of a bench.locomo dump (module docstring)."""
    from bench.locomo_dump import load

    conversations: list[dict[str, Any]] = []
    questions: list[dict[str, Any]] = []
    for c, conv in enumerate(load(path)):
        turns = sorted(conv["turns"])  # message ids, in id order (rank's tie-break)
        index = {message_id: i for i, message_id in enumerate(turns)}
        pair = [next(iter(turn_ids(conv["turns"][m])), (-1, -1)) for m in turns]
        items = sorted(conv["item_sources"])
        reports = sorted(conv["report_events"])
        conversations.append(
            {
                "turns": len(turns),
                "items": [[index[m] for m in conv["item_sources"][i] if m in index] for i in items],
                # a report lifts each turn behind its key events once (layered.report_message_ids: a set)
                "reports": [
                    sorted({index[m] for m in conv["report_events"][r] if m in index}) for r in reports
                ],
            }
        )
        of_pair = {p: i for i, p in reversed(list(enumerate(pair)))}
        for q in conv["questions"]:
            calls = {("messages" if windowed else None): rows for windowed, rows, _, _ in q["calls"]}
            entries = [rows for windowed, rows, _, _ in q["calls"] if not windowed]
            wanted = set().union(*(turn_ids(e) for e in q["evidence"])) if q["evidence"] else set()
            turns_ranked = sorted(calls["messages"], key=lambda r: (-r.score, r.id))
            keep = {index[r.id] for r in turns_ranked[:POOL]} | {of_pair[p] for p in wanted if p in of_pair}
            pool = sorted(_turn(index[r.id], r) for r in calls["messages"] if index[r.id] in keep)
            questions.append(
                {
                    "c": c,
                    "split": "fit" if len(questions) % 2 == 0 else "holdout",
                    "category": q["category"],
                    "evidence": sorted(of_pair[p] for p in wanted if p in of_pair),
                    "wanted": len(wanted),
                    "items": _entries(entries[0] if entries else [], items),
                    "reports": _entries(entries[1] if len(entries) > 1 else [], reports),
                    "pool": {name: [row[i] for row in pool] for i, name in enumerate(POOL_COLUMNS)},
                }
            )
    return {"conversations": conversations, "questions": questions}


def _flags(parts: dict[str, float]) -> int:
    return (
        SPEAKER * (parts.get("speaker", 0) > 0)
        + TIME * (parts.get("time", 0) > 0)
        + PERIOD * (parts.get("period", 0) > 0)
    )


def _turn(i: int, row: Any) -> list[float]:
    dense = sum(row.parts.get(name, 0.0) for name in ("dense", "neighbours", "subject"))
    return [i, round(dense, 4), round(row.coverage, 4), _flags(row.parts)]


def _entries(rows: Sequence[Any], order: Sequence[int]) -> dict[str, Any]:
    """The cosine (None: not scored), coverage and evidence flags of each item (or report) in `order` (id
    order), and the subject part they share."""
    from strataflow.retrieval.ranking import calibration

    by_id = {r.id: r for r in rows}
    out: dict[str, Any] = {"sim": [], "coverage": [], "flags": [], "subject": 0.0}
    for entry_id in order:
        r = by_id.get(entry_id)
        if r is None or r.similarity is None:
            out["sim"].append(None)
            out["coverage"].append(0)
            out["flags"].append(0)
            continue
        cal = calibration(r.model)
        out["sim"].append(round(cal.center + r.parts.get("dense", 0.0) / cal.slope, 5))
        out["coverage"].append(round(r.coverage, 4))
        out["flags"].append(_flags(r.parts))
        out["subject"] = r.parts.get("subject", 0.0)
    return out


@dataclass(frozen=True)
class Entries:
    """One conversation's items (or reports) as asked by its questions: what their scores need."""

    questions: np.ndarray  # the questions' rows in Prepared
    base: np.ndarray  # question x entry: the logit without evidence (-inf: not scored)
    flags: np.ndarray  # question x entry: evidence flags
    turns: np.ndarray  # entry x turn: how many times the entry names the turn
    top: int  # how many of the best lift their turns (layered.ITEM_TOP, REPORT_TOP)


@dataclass(frozen=True)
class Prepared:
    """The questions as arrays (one row each, turns padded) under one calibration and entry word weight."""

    split: np.ndarray  # question -> "fit" / "holdout"
    category: np.ndarray
    wanted: np.ndarray  # evidence turns named (some may not be turns of the dump)
    valid: np.ndarray  # question x slot: a pooled turn
    turn: np.ndarray  # question x slot: the turn's index in its conversation
    evidence: np.ndarray  # question x slot: an evidence turn
    dense: np.ndarray
    coverage: np.ndarray
    flags: np.ndarray
    entries: tuple[tuple[Entries, Entries], ...]  # per conversation: items, reports
    turns: tuple[int, ...]  # per conversation: its turns


def _entries_of(
    data: dict[str, Any], c: int, kind: str, top: int, cal: DenseCalibration, entry_lexical: float
) -> Entries:
    conv = data["conversations"][c]
    rows = [n for n, q in enumerate(data["questions"]) if q["c"] == c]
    width = len(conv[kind])
    base, flags = np.full((len(rows), width), -np.inf), np.zeros((len(rows), width), dtype=np.int64)
    for r, n in enumerate(rows):
        entry = data["questions"][n][kind]
        for e, sim in enumerate(entry["sim"]):
            if sim is not None:
                lexical = entry_lexical * cal.words * entry["coverage"][e]
                base[r, e] = (sim - cal.center) * cal.slope + entry["subject"] + lexical
                flags[r, e] = entry["flags"][e]
    turns = np.zeros((width, conv["turns"]))
    for e, named in enumerate(conv[kind]):
        for t in named:
            turns[e, t] += 1
    return Entries(np.array(rows, dtype=np.int64), base, flags, turns, top)


def prepare(data: dict[str, Any], cal: DenseCalibration, entry_lexical: float) -> Prepared:
    """The questions of `data` as arrays under this calibration and entry word weight."""
    questions = data["questions"]
    width = max(len(q["pool"]["turn"]) for q in questions)
    shape = (len(questions), width)
    valid, evidence = np.zeros(shape, dtype=bool), np.zeros(shape, dtype=bool)
    dense, coverage = np.zeros(shape), np.zeros(shape)
    turn, flags = np.zeros(shape, dtype=np.int64), np.zeros(shape, dtype=np.int64)
    for n, q in enumerate(questions):
        pool = q["pool"]  # sorted by turn: rank's tie-break
        m = len(pool["turn"])
        turn[n, :m], flags[n, :m] = pool["turn"], pool["flags"]
        valid[n, :m], evidence[n, :m] = True, np.isin(turn[n, :m], q["evidence"])
        dense[n, :m], coverage[n, :m] = pool["dense"], pool["coverage"]
    entries = tuple(
        (_entries_of(data, c, "items", ITEM_TOP, cal, entry_lexical),
         _entries_of(data, c, "reports", REPORT_TOP, cal, entry_lexical))
        for c in range(len(data["conversations"]))
    )  # fmt: skip
    return Prepared(
        split=np.array([q["split"] for q in questions]),
        category=np.array([q["category"] for q in questions]),
        wanted=np.array([q["wanted"] for q in questions]),
        valid=valid, turn=turn, evidence=evidence, dense=dense, coverage=coverage, flags=flags,
        entries=entries, turns=tuple(conv["turns"] for conv in data["conversations"]),
    )  # fmt: skip


def _evidence(flags: np.ndarray, weights: RankingWeights) -> np.ndarray:
    return (
        weights.speaker * (flags & SPEAKER > 0)
        + weights.time * (flags & TIME > 0)
        + weights.period * (flags & PERIOD > 0)
    )


def _lineage(data: Prepared, weights: RankingWeights) -> np.ndarray:
    """Question x slot: the lineage lift of each pooled turn (layered.lineage_lift), in logits."""
    lift = np.zeros(data.dense.shape)
    for c, pair in enumerate(data.entries):
        per_turn = np.zeros((len(pair[0].questions), data.turns[c]))
        for entries, weight in zip(pair, (weights.item, weights.report), strict=True):
            if entries.base.shape[1] == 0:
                continue
            z = entries.base + np.minimum(_evidence(entries.flags, weights), weights.boost_max)
            score = np.where(np.isfinite(z), 1.0 / (1.0 + np.exp(-z)), -1.0)
            order = np.argsort(-score, axis=1, kind="stable")[:, : entries.top]  # ties by id
            chosen = np.zeros(score.shape)
            np.put_along_axis(chosen, order, np.take_along_axis(np.maximum(score, 0), order, axis=1), axis=1)
            per_turn += weight * (chosen @ entries.turns)
        rows = pair[0].questions
        lift[rows] = np.take_along_axis(per_turn, data.turn[rows], axis=1)
    return lift


def recall(data: Prepared, split: str, weights: RankingWeights) -> dict[str, dict[str, float]]:
    """Dialog recall (percent) per category and overall at each k over the split's questions ("all": both),
    each question's turns ranked as strataflow.retrieval.ranking.rank ranks them."""
    evidence = _evidence(data.flags, weights) + np.minimum(_lineage(data, weights), weights.lift_max)
    z = data.dense + weights.lexical * data.coverage + np.minimum(evidence, weights.boost_max)
    # The hits are ordered by their score as shown (rounded to SCORE_DIGITS), ties by id, as search's are.
    score = np.where(data.valid, np.round(1.0 / (1.0 + np.exp(-z)), SCORE_DIGITS), -1.0)
    order = np.argsort(-score, axis=1, kind="stable")
    hits = np.cumsum(np.take_along_axis(data.evidence, order, axis=1), axis=1)
    per_k = np.stack([hits[:, k - 1] for k in KS], axis=1) / np.maximum(data.wanted, 1)[:, None]
    per_k[data.wanted == 0] = 1.0
    chosen = np.ones(len(per_k), dtype=bool) if split == "all" else data.split == split
    out = {}
    for key in sorted(set(data.category[chosen])) + ["overall"]:
        rows = chosen & ((data.category == key) | (key == "overall"))
        mean = per_k[rows].mean(axis=0)
        out[key] = {**{str(k): round(100 * float(v), 1) for k, v in zip(KS, mean, strict=True)},
                    "questions": int(rows.sum())}  # fmt: skip
    return out


def criterion(table: dict[str, dict[str, float]]) -> float:
    """Sum over categories and k of min(ours - DRAGON, 5), overall against DRAGON + 8."""
    total = 0.0
    for category, row in DRAGON.items():
        margin = 8.0 if category == "overall" else 0.0
        if category in table:
            total += sum(min(table[category][str(k)] - d - margin, 5.0) for k, d in zip(KS, row, strict=True))
    return round(total, 3)


def resolution(data: Prepared, split: str = "fit") -> float:
    """The smallest change of the criterion one question can make: one question of the split's largest
    category, at one k (percent points)."""
    chosen = data.split == split
    largest = max(int(np.sum(chosen & (data.category == c))) for c in set(data.category[chosen]))
    return round(100.0 / largest, 3)


def fit_weights(data: Prepared, start: RankingWeights) -> RankingWeights:
    """The dialog weights: a coordinate search over GRID from `start` on the fit half, a move taken when it
    gains at least the criterion's `resolution` (module docstring)."""
    best, step = start, resolution(data)
    score = criterion(recall(data, "fit", best))
    moved = True
    while moved:
        moved = False
        for name, values in GRID.items():
            for value in values:
                tried = _with(best, name, value)
                got = criterion(recall(data, "fit", tried))
                if got >= score + step:
                    best, score, moved = tried, got, True
    return best


def _with(weights: RankingWeights, name: str, value: float) -> RankingWeights:
    """`weights` with one weight changed (lift_max follows item and report: the most lineage can add)."""
    changed = replace(weights, **{name: value})
    return replace(changed, lift_max=round(ITEM_TOP * changed.item + REPORT_TOP * changed.report, 4))


def profile(data: Prepared, weights: RankingWeights) -> dict[str, Any]:
    """Per weight of GRID, the criterion on each half at every grid value, the others held: what a
    reader needs to see how flat the choice is."""
    return {
        name: {
            str(value): [
                criterion(recall(data, split, _with(weights, name, value))) for split in ("fit", "holdout")
            ]
            for value in values
        }
        for name, values in GRID.items()
    }
