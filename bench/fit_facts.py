"""bench.facts' labelled scores for bench.fit_ranking: the per-model calibrations, the entries' word weight.

`labelled(lines)` reads the "case" and "unrelated" lines of a `python -m bench.facts --dump PATH` file (every
question of the English and Chinese fact sets, and every unrelated query of both files, asked of every
subject) and keeps, per search, its split, the space its rows were compared in (the subject's own model for
a query in the subject's language: all-MiniLM-L6-v2 for English facts, multilingual-e5-small for Chinese;
``multilingual-e5-small:cross`` across languages), the right fact's index (None for an unrelated query) and
per fact [index, cosine, subject part, coverage]: the cosine read back from the dense part of its explained
logit through the calibration it was dumped under, and the rest of the logit besides the words, which no
calibration changes.

- `fit_entry_lexical`: the word weight of an item, report or chunk (``RankingWeights.entry_lexical``): the
  grid value (``ENTRY_GRID``) with the best top-1 over the fit subjects' questions among those that do not
  lose on the other benchmark (LoCoMo's fit half: items' words change their lineage; bench.fit_ranking
  says which do), ties keeping the weight in use (a change must buy a question);
- `fit_center`: the margin rule of every model's centre: where a row with the rest of its logit (subject
  reference and words) scores 0.5, half-way between the best unrelated row and the lowest right answer on
  the fit subjects (`gap`), so that 0.5 keeps every right answer and no unrelated one (across languages,
  fit_cross: nine right answers in ten);
- `fit_slope`: the spread rule: a difference in meaning is worth the same logits under every model, so a
  model's slope is the default model's (8, the unit every weight is counted in) times the ratio of the
  right answers' spreads (standard deviations of their cosines on the fit subjects), the default model's
  over this model's.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from strataflow.llm.embeddings import is_cjk_text
from strataflow.retrieval.ranking import CALIBRATION, DEFAULT_MODEL, DenseCalibration

E5 = "multilingual-e5-small"
CROSS = "multilingual-e5-small:cross"
# The share of right answers a centre keeps at or above 0.5 on the fit subjects: every one for a model's own
# language (the lowest right answer), nine in ten across languages (fit_cross.RIGHT_SHARE).
RIGHT_SHARE = 1.0
DIGITS = 3  # centres are rounded to this many decimals, slopes to one
ENTRY_GRID = (0.0, 0.4, 0.8, 1.2, 1.6, 2.0)  # logits (steps of 0.05 of MiniLM cosine)


def space(query: str, subject_lang: str) -> str:
    """The calibration a subject's rows are scored under for this query (the module docstring)."""
    if is_cjk_text(query) != (subject_lang == "zh"):
        return CROSS
    return E5 if subject_lang == "zh" else DEFAULT_MODEL


def labelled(lines: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per search of the dump's fact sets (module docstring); a line without the calibration it
    was dumped under was dumped under the code's."""
    rows = []
    code = {name: [cal.center, cal.slope] for name, cal in CALIBRATION.items()}
    for line in lines:
        if line["kind"] not in ("case", "unrelated"):
            continue
        name = space(line["query"], line["subject_lang"])
        center, slope = line.get("calibration", code)[name]
        facts = []
        for fact in line["candidates"]:
            parts = fact["parts"]
            if not parts:
                continue
            rest = sum(float(v) for k, v in parts.items() if k not in ("dense", "lexical"))
            cos = round(center + float(parts["dense"]) / slope, 5)
            facts.append(
                [fact["fact"], cos, round(rest, 4), round(float(fact["ranking"].get("coverage", 0)), 4)]
            )
        rows.append({"split": line["split"], "space": name, "right": line["right"], "facts": facts})
    return rows


def words(name: str) -> float:
    """The share of the word weight a space's rows get (strataflow.retrieval.ranking.CALIBRATION)."""
    return 1.0 if name == DEFAULT_MODEL else 0.0


def logit(fact: Sequence[float], cal: DenseCalibration, entry_lexical: float) -> float:
    _, cos, rest, cov = fact
    return (cos - cal.center) * cal.slope + rest + entry_lexical * cal.words * cov


def table(
    rows: Sequence[dict[str, Any]], split: str, name: str, cal: DenseCalibration, entry_lexical: float
) -> dict[str, Any]:
    """A split's figures in one space: cases, top-1, right answers >= 0.5, unrelated searches and the best
    unrelated score (`split` "all": both)."""
    rows = [r for r in rows if r["space"] == name and split in ("all", r["split"])]
    cases = [r for r in rows if r["right"] is not None]
    top1 = above = 0
    for row in cases:
        scored = sorted(row["facts"], key=lambda f: -logit(f, cal, entry_lexical))
        top1 += bool(scored) and scored[0][0] == row["right"]
        above += any(f[0] == row["right"] and logit(f, cal, entry_lexical) >= 0 for f in row["facts"])
    unrelated = [logit(f, cal, entry_lexical) for r in rows if r["right"] is None for f in r["facts"]]
    n = len(cases)
    return {
        "cases": n,
        "top1": round(top1 / n, 4) if n else 0.0,
        "right_above_0_5": round(above / n, 4) if n else 0.0,
        "unrelated_queries": sum(r["right"] is None for r in rows),
        "max_unrelated_score": round(1 / (1 + math.exp(-max(unrelated))), 4) if unrelated else 0.0,
    }


def fit_entry_lexical(
    rows: Sequence[dict[str, Any]],
    calibrations: dict[str, DenseCalibration],
    start: float,
    keeps: Callable[[float], bool] = lambda weight: True,
) -> float:
    """The entries' word weight: best fit-subject top-1 over `start` and the values of ENTRY_GRID that
    `keeps` (the other benchmark does not lose by them), ties going to the value nearest `start` (the weight
    in use: a change must buy a question)."""

    def hits(weight: float) -> int:
        total = 0
        for name, cal in calibrations.items():
            t = table(rows, "fit", name, cal, weight)
            total += round(t["top1"] * t["cases"])
        return total

    scores = {weight: hits(weight) for weight in (start, *ENTRY_GRID) if weight == start or keeps(weight)}
    top = max(scores.values())
    return min((w for w, got in scores.items() if got == top), key=lambda w: (abs(w - start), w))


def _right_and_unrelated(
    rows: Sequence[dict[str, Any]], name: str, split: str = "fit"
) -> tuple[list[Sequence[float]], list[Sequence[float]]]:
    rows = [r for r in rows if r["space"] == name and r["split"] == split]
    right = [f for r in rows if r["right"] is not None for f in r["facts"] if f[0] == r["right"]]
    unrelated = [f for r in rows if r["right"] is None for f in r["facts"]]
    return right, unrelated


def gap(rows: Sequence[dict[str, Any]], name: str, slope: float, entry_lexical: float) -> tuple[float, float]:
    """(best unrelated, right answers' RIGHT_SHARE quantile from below) in one space at this slope, on the fit
    subjects: where each row stands in cosine once the rest of its logit is counted."""
    right, unrelated = _right_and_unrelated(rows, name)
    standing = lambda f: f[1] + (f[2] + entry_lexical * words(name) * f[3]) / slope  # noqa: E731
    low = np.quantile([standing(f) for f in right], 1 - RIGHT_SHARE, method="lower")
    return float(max(standing(f) for f in unrelated)), float(low)


def fit_center(rows: Sequence[dict[str, Any]], name: str, slope: float, entry_lexical: float) -> float:
    """The margin rule (module docstring) for one space at this slope: the middle of its gap."""
    high, low = gap(rows, name, slope, entry_lexical)
    return round((low + high) / 2, DIGITS)


def spread(rows: Sequence[dict[str, Any]], name: str) -> float:
    """The standard deviation of the right answers' cosines in a space, on the fit subjects."""
    right, _ = _right_and_unrelated(rows, name)
    return float(np.std([f[1] for f in right]))


def fit_slope(rows: Sequence[dict[str, Any]], name: str, default_slope: float) -> float:
    """The spread rule (module docstring)."""
    return round(default_slope * spread(rows, DEFAULT_MODEL) / spread(rows, name), 1)
