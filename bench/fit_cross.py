"""bench.facts' shape subjects for bench.fit_ranking: the cross-language calibration.

A question and a memory in different languages (a Chinese question about an English fact, or the reverse) are
compared under the multilingual model (strataflow.retrieval.layer_sql: an English item's embedding_multi, a
Chinese item's own vector), whose cosines across languages are lower than within one: they get a calibration
of their own, ``multilingual-e5-small:cross`` in strataflow.retrieval.ranking.CALIBRATION. It is the output
of `fit_cross` over labelled scores, fitted on bench.facts' fit subjects only and checked on the holdout ones:

- the labelled scores: from `python -m bench.facts --shapes-only --dump PATH` (bench.facts_shapes), every
  search whose question's language is not its subject's: the right fact of a cross question (label 1) and
  every hit of an unrelated query (label 0), each as its similarity (the dense part of its explained logit,
  read back through the calibration it was dumped under) and the rest of its logit (the subject reference;
  the model's rows take no words), which the calibration does not change;
- the slope: the model's own (its calibration within one language) times the ratio of the right answers'
  spreads (standard deviations) within one language (the Chinese shape questions about Chinese facts) and
  across languages: a difference in meaning is worth the same logits in either (across languages the
  cosines are lower, not wider: 0.881 +- 0.022 within, 0.789 +- 0.024 across on the fit subjects). Platt's
  sigmoid calibration (`platt_slope`, as scikit-learn's `_sigmoid_calibration`, the rest of the logit as an
  offset) is printed beside it: on 30 right answers it gave 67.8, and the holdout's right answers at or
  above 0.5 fell to 0.7 under it (1.0 under the spread's);
- the centre: where a row with the rest of its logit scores 0.5, half-way between the best unrelated row and
  the right answers' 10th percentile (the margin rule of the other models' centres, ranking.CALIBRATION),
  so that the threshold 0.5 keeps nine right answers in ten and no unrelated one on the fit subjects.

The labelled scores are committed as bench/data/ranking_fit_cross.json (`python -m bench.fit_ranking
--facts-dump PATH --save` writes them again); `table` gives, per split (fit, holdout), the cross cases, top-1,
the share of right answers at or above 0.5 and the best unrelated score under a calibration.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from bench.facts import DATA, load_subjects
from bench.facts_shapes import load_shape_subjects
from strataflow.config import Settings
from strataflow.llm.embeddings import is_cjk_text
from strataflow.retrieval.ranking import DenseCalibration

SAME = E5_NAME = "multilingual-e5-small"
CROSS = "multilingual-e5-small:cross"
RIGHT_SHARE = 0.9  # the share of right answers the centre keeps at or above 0.5 on the fit subjects
DIGITS = 3  # the constants are rounded to this many decimals (the code holds them so)


def cross_rows(lines: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The labelled scores of a bench.facts_shapes dump: one row per search in the multilingual model's
    space, across languages or (`same`) a Chinese question about Chinese facts (its split, the right fact's
    index or None, and per hit: fact, similarity, rest of the logit)."""
    rows = []
    for line in lines:
        if line["kind"] not in ("shape", "shape_unrelated"):
            continue
        same = is_cjk_text(line["query"]) == (line["subject_lang"] == "zh")
        if same and line["subject_lang"] != "zh":
            continue  # English about English: the default model's space
        center, slope = line["calibration"][SAME if same else CROSS]
        hits = []
        for hit in line["hits"]:
            parts = hit["parts"]
            dense = float(parts.get("dense", 0.0))
            hits.append(
                {
                    "fact": hit["fact"],
                    "sim": round(center + dense / slope, 5),
                    "rest": round(sum(float(v) for v in parts.values()) - dense, 4),
                }
            )
        row = {"split": line["split"], "right": line["right"], "hits": hits, "query": line["query"]}
        rows.append({**row, "same": True} if same else row)
    return rows


def labelled_arrays(rows: Sequence[dict[str, Any]], split: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(similarity, rest, label) of the split's right answers (1) and unrelated hits (0) across languages."""
    sims, rests, labels = [], [], []
    for row in rows:
        if row["split"] != split or row.get("same"):
            continue
        for hit in row["hits"]:
            if row["right"] is None or hit["fact"] == row["right"]:
                sims.append(hit["sim"])
                rests.append(hit["rest"])
                labels.append(0.0 if row["right"] is None else 1.0)
    return np.array(sims), np.array(rests), np.array(labels)


def platt_slope(sims: np.ndarray, rests: np.ndarray, labels: np.ndarray) -> float:
    """The slope of Platt's sigmoid calibration of labels on sims (rests as an offset, classes weighted
    equally, Platt's smoothed targets), by Newton's method on (slope, intercept)."""
    positives, negatives = labels.sum(), len(labels) - labels.sum()
    target = np.where(labels > 0, (positives + 1) / (positives + 2), 1 / (negatives + 2))
    weight = np.where(labels > 0, len(labels) / (2 * positives), len(labels) / (2 * negatives))
    x = np.stack([sims, np.ones_like(sims)], axis=1)
    theta = np.zeros(2)
    for _ in range(100):
        p = 1 / (1 + np.exp(-(x @ theta + rests)))
        gradient = x.T @ (weight * (p - target))
        hessian = (x * (weight * p * (1 - p))[:, None]).T @ x + 1e-9 * np.eye(2)
        step = np.linalg.solve(hessian, gradient)
        theta -= step
        if np.abs(step).max() < 1e-10:
            break
    return float(theta[0])


def fit_cross(rows: Sequence[dict[str, Any]], e5_slope: float) -> DenseCalibration:
    """The cross-language calibration fitted on the fit subjects' rows (module docstring), from the
    within-language slope `e5_slope`."""
    sims, rests, labels = labelled_arrays(rows, "fit")
    within = [
        hit["sim"]
        for row in rows
        if row["split"] == "fit" and row.get("same") and row["right"] is not None
        for hit in row["hits"]
        if hit["fact"] == row["right"]
    ]
    slope = round(e5_slope * float(np.std(within)) / float(np.std(sims[labels > 0])), 1)
    # Where each row stands in cosine once the rest of its logit is counted: sim + rest / slope.
    standing = sims + rests / slope
    right = np.quantile(standing[labels > 0], 1 - RIGHT_SHARE, method="lower")
    unrelated = standing[labels == 0].max()
    center = round(float((right + unrelated) / 2), DIGITS)
    return DenseCalibration(center=center, slope=slope, words=0.0)


def table(rows: Sequence[dict[str, Any]], split: str, cal: DenseCalibration) -> dict[str, Any]:
    """A split's cross figures under `cal`: cases, top-1, right answers >= 0.5, best unrelated score."""
    rows = [row for row in rows if row["split"] == split and not row.get("same")]
    cases = [row for row in rows if row["right"] is not None]
    unrelated = [row for row in rows if row["right"] is None]

    def score(hit: dict[str, Any]) -> float:
        return 1 / (1 + math.exp(-((hit["sim"] - cal.center) * cal.slope + hit["rest"])))

    top1 = above = 0
    for row in cases:
        scored = sorted(row["hits"], key=lambda hit: -score(hit))
        top1 += bool(scored) and scored[0]["fact"] == row["right"]
        above += any(hit["fact"] == row["right"] and score(hit) >= 0.5 for hit in row["hits"])
    worst = max((score(hit) for row in unrelated for hit in row["hits"]), default=0.0)
    n = len(cases)
    return {
        "cases": n,
        "top1": round(top1 / n, 4) if n else 0.0,
        "right_above_0_5": round(above / n, 4) if n else 0.0,
        "unrelated_queries": len(unrelated),
        "max_unrelated_score": round(worst, 4),
    }


# The second model across languages (strataflow.retrieval.cross_check): its weight, WEIGHTS.cross_check, from
# labelled cosines of two question sets of different shapes: bench.facts' questions asked in the other
# language (named subjects, third person) and the cross shape of bench.facts_shapes (first person, opaque
# ids).
SECOND_GRID = tuple(float(weight) for weight in range(41))  # logits per unit of the second model's cosine
TRANSLATED = DATA / "facts_cross.json"


def second_scores(settings: Settings) -> list[dict[str, Any]]:
    """The labelled cosines: per question (the dense text a subject search embeds: without the subject's
    names and pronouns), its set (translated, shapes), split, the right fact's index, and per fact of its
    subject the multilingual model's cosine (``e5``, as search compares a row across languages) and the
    second model's (``use``)."""
    asked = json.loads(TRANSLATED.read_text(encoding="utf-8"))["questions"]
    cases = [
        ("translated", subject.split, subject.subject, list(subject.facts), asked[subject.subject])
        for subject in load_subjects("all")[0]
        if subject.subject in asked
    ]
    cases += [
        ("shapes", shaped.split, shaped.subject, list(shaped.facts), list(shaped.questions["cross"]))
        for shaped in load_shape_subjects("all", DATA)
    ]
    return [row for case in cases for row in _second_rows(settings, *case)]


def _second_rows(
    settings: Settings, name: str, split: str, subject: str, facts: list[str], questions: list[str]
) -> list[dict[str, Any]]:
    """One subject's labelled cosines (second_scores)."""
    from strataflow.llm.embeddings import get_embedder
    from strataflow.retrieval import cross_check
    from strataflow.retrieval.query_reading import without_subject

    e5 = get_embedder(settings, settings.embed_cjk_model or E5_NAME)
    dense = [without_subject(question, subject) for question in questions]
    e5_facts = np.asarray(e5.encode(facts), dtype=np.float64)
    e5_questions = np.asarray(e5.encode_queries(dense), dtype=np.float64)
    use_facts = cross_check.encode(facts).astype(np.float64)
    use_questions = cross_check.encode(dense).astype(np.float64)
    return [
        {
            "set": name,
            "split": split,
            "subject": subject,
            "query": question,
            "right": right,
            "e5": [round(float(v), 5) for v in e5_facts @ e5_questions[right]],
            "use": [round(float(v), 5) for v in use_facts @ use_questions[right]],
        }  # fmt: skip
        for right, question in enumerate(questions)
    ]


def second_ranks(rows: Sequence[dict[str, Any]], cross_slope: float, weight: float) -> list[int]:
    """The right fact's rank (1 = first) per question: e5 across languages (its slope) and the second model
    (weight; the part's offset, the best cosine of the subject's rows, is the same for every row)."""
    ranks = []
    for row in rows:
        logits = cross_slope * np.array(row["e5"]) + weight * np.array(row["use"])
        ranks.append(1 + int(np.sum(logits > logits[row["right"]])))
    return ranks


def fit_second(rows: Sequence[dict[str, Any]], cross_slope: float) -> float:
    """ranking.WEIGHTS.cross_check: the grid value with the most right answers first over the fit subjects
    of both sets, ties to the better mean reciprocal rank, then the smaller weight."""
    fit = [row for row in rows if row["split"] == "fit"]

    def merit(weight: float) -> tuple[int, float, float]:
        ranks = second_ranks(fit, cross_slope, weight)
        return sum(rank == 1 for rank in ranks), round(float(np.mean([1 / r for r in ranks])), 6), -weight

    return max(SECOND_GRID, key=merit)


def second_table(rows: Sequence[dict[str, Any]], cross_slope: float, weight: float) -> dict[str, Any]:
    """Per set and split: cases, top-1 under the multilingual model alone and with the second model."""
    out: dict[str, Any] = {}
    for name in sorted({row["set"] for row in rows}):
        for split in ("fit", "holdout"):
            found = [row for row in rows if row["set"] == name and row["split"] == split]
            alone, both = second_ranks(found, cross_slope, 0.0), second_ranks(found, cross_slope, weight)
            n = len(found)
            out[f"{name}_{split}"] = {
                "cases": n,
                "top1_e5": round(sum(r == 1 for r in alone) / n, 4) if n else 0.0,
                "top1_with_second": round(sum(r == 1 for r in both) / n, 4) if n else 0.0,
            }
    return out
