"""Ranking for hybrid retrieval: pure functions over the rows of one search (no database).

Each candidate row arrives with its dense similarity (cosine to the query embedding, None when the row has
no embedding yet), its term frequencies for the query's lexemes and its document length. From those:

- a BM25 score (Robertson: k1 = 1.2, b = 0.75, idf = ln(1 + (N - df + 0.5) / (df + 0.5))) with the
  statistics taken over the candidate set itself;
- for conversation messages, over a *window*: a turn's own terms count twice and the terms of up to
  ``WINDOW`` neighbouring turns on each side count once (neighbours = same conversation, ordered by event
  time, no gap above ``SESSION_GAP``). A short reply ("Yes, last Saturday!") is found through the turn
  that asked about it; the question's words rarely sit in one turn only;
- the dense similarity smoothed the same way (its own plus ``DENSE_NEIGHBOUR`` of each adjacent turn);
- a convex fusion of the two after min-max scaling: ``FTS_WEIGHT`` * bm25 + ``DENSE_WEIGHT`` * dense;
- added evidence (`evidence`), each argued from a kind of question, never from a particular one
  (strataflow.retrieval.query_reading reads the query):
  - the turn's speaker is the one person the query names: + ``SPEAKER_WEIGHT``;
  - a *when* question and a turn that states a time: + ``TIME_WEIGHT``;
  - the query names a period and the turn's event time is in it: + ``PERIOD_WEIGHT``;
  - lineage: an L2 item or L3 report that matches the query lifts the turns it came from (`Candidate.lift`,
    computed by strataflow.retrieval.layered);
- for a question that asks for a set of things, a session spread: while the list is built, each turn already
  taken from a session lowers that session's other turns by ``SESSION_SPREAD`` (`spread_sessions`).
The total is scaled back to at most 1 when the evidence pushed it above.

The constants were chosen on half of the dev questions of the dialog-recall benchmark and checked on the
other half (figures in docs/retrieval-quality.md); they are general: no rule looks at a particular question or
dataset.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from strataflow.retrieval.query_reading import QueryReading, has_time_expression

K1 = 1.2
B = 0.75
WINDOW = 2  # neighbouring turns on each side that share a turn's full-text window
SELF_WEIGHT = 2.0  # a turn's own terms count this many times inside its window
SESSION_GAP = timedelta(hours=1)  # adjacent turns further apart than this are different sessions
DENSE_NEIGHBOUR = 0.5  # share of each adjacent turn's similarity added to a turn's own
FTS_WEIGHT = 0.6
DENSE_WEIGHT = 0.4
SPEAKER_WEIGHT = 0.3  # the turn's speaker is the person the query names
TIME_WEIGHT = 0.1  # a when-question and a turn that states a time
PERIOD_WEIGHT = 0.2  # the turn's event time is in the period the query names
SESSION_SPREAD = 0.02  # a set question: each turn taken from a session lowers that session's other turns


@dataclass
class Candidate:
    """One row under consideration: its scores' inputs and, after `rank`, its fused score."""

    id: int
    group: str  # conversation id (messages) or anything that says which rows are neighbours
    event_at: datetime | None
    similarity: float | None
    doc_len: int
    tf: dict[str, int]
    payload: dict[str, object] = field(default_factory=dict)
    speaker: str | None = None
    text: str = ""  # read for a time expression on when-questions
    lift: float = 0.0  # lineage evidence from L2 items and L3 reports (strataflow.retrieval.layered)
    score: float = 0.0
    bm25: float = 0.0
    dense: float = 0.0


def neighbour_order(rows: Sequence[Candidate]) -> tuple[list[Candidate], np.ndarray]:
    """Rows sorted by (group, time, id) and, for each, the index of its session (a run of close turns)."""
    ordered = sorted(rows, key=lambda r: (r.group, r.event_at or datetime.min, r.id))
    session = np.zeros(len(ordered), dtype=np.int64)
    for i in range(1, len(ordered)):
        prev, cur = ordered[i - 1], ordered[i]
        same = prev.group == cur.group and (
            prev.event_at is None or cur.event_at is None or cur.event_at - prev.event_at <= SESSION_GAP
        )
        session[i] = session[i - 1] if same else session[i - 1] + 1
    return ordered, session


def window_sum(
    values: np.ndarray, session: np.ndarray, width: int, neighbour_weight: float, self_weight: float
) -> np.ndarray:
    """Per row: self_weight * own value + neighbour_weight * values of rows within `width` in its session."""
    out = values * self_weight
    for shift in range(1, width + 1):
        if shift >= len(values):
            break
        same = (session[shift:] == session[:-shift]).astype(values.dtype)
        if values.ndim > 1:
            same = same[:, None]
        out[shift:] += neighbour_weight * values[:-shift] * same
        out[:-shift] += neighbour_weight * values[shift:] * same
    return out


def bm25(tf: np.ndarray, doc_len: np.ndarray) -> np.ndarray:
    """BM25 of each row (tf: rows x lexemes) with document frequencies from these rows."""
    n = tf.shape[0]
    if n == 0 or tf.shape[1] == 0:
        return np.zeros(n)
    df = (tf > 0).sum(axis=0)
    idf = np.log1p((n - df + 0.5) / (df + 0.5))
    avg = max(float(doc_len.mean()), 1e-9)
    norm = K1 * (1 - B + B * doc_len / avg)
    return ((tf * (K1 + 1) / (tf + norm[:, None])) * idf).sum(axis=1)


def scaled(values: np.ndarray) -> np.ndarray:
    """Min-max to [0, 1]; a constant column scales to 0 (it cannot order anything)."""
    if len(values) == 0:
        return values
    low, high = float(values.min()), float(values.max())
    return (values - low) / (high - low) if high - low > 1e-12 else np.zeros_like(values)


def evidence(rows: Sequence[Candidate], reading: QueryReading | None) -> np.ndarray:
    """Per row, the evidence added to its fused score (see the module docstring)."""
    extra = np.array([r.lift for r in rows], dtype=np.float64)
    if reading is None:
        return extra
    if len(reading.speakers) == 1:
        extra += SPEAKER_WEIGHT * np.array([r.speaker in reading.speakers for r in rows], dtype=np.float64)
    if reading.asks_when:
        extra += TIME_WEIGHT * np.array([has_time_expression(r.text) for r in rows], dtype=np.float64)
    if reading.period is not None:
        period = reading.period
        extra += PERIOD_WEIGHT * np.array([period.contains(r.event_at) for r in rows], dtype=np.float64)
    return extra


def spread_sessions(scores: np.ndarray, session: np.ndarray, penalty: float, depth: int) -> list[int]:
    """Row indexes best first, where each of the first `depth` picks lowers the rest of its session."""
    scores = scores.copy()
    taken = np.zeros(len(scores), dtype=bool)
    order: list[int] = []
    for _ in range(min(depth, len(scores))):
        best = int(np.argmax(np.where(taken, -np.inf, scores)))
        order.append(best)
        taken[best] = True
        scores[(session == session[best]) & ~taken] -= penalty
    rest = sorted(np.flatnonzero(~taken), key=lambda i: -scores[i])
    return order + [int(i) for i in rest]


def rank(
    rows: Sequence[Candidate],
    lexemes: Sequence[str],
    windowed: bool,
    reading: QueryReading | None = None,
    depth: int = 50,
) -> list[Candidate]:
    """Score every row (see the module docstring) and return them best first; `depth` bounds the session
    spread of set questions (the caller's k)."""
    if not rows:
        return []
    if windowed:
        ordered, session = neighbour_order(rows)
        width, self_weight, dense_neighbour = WINDOW, SELF_WEIGHT, DENSE_NEIGHBOUR
    else:
        ordered, session = list(rows), np.arange(len(rows))
        width, self_weight, dense_neighbour = 0, 1.0, 0.0
    tf = np.array([[r.tf.get(lexeme, 0) for lexeme in lexemes] for r in ordered], dtype=np.float64)
    tf = tf.reshape(len(ordered), len(lexemes))
    doc_len = np.array([r.doc_len for r in ordered], dtype=np.float64)
    text_scores = bm25(
        window_sum(tf, session, width, 1.0, self_weight),
        window_sum(doc_len, session, width, 1.0, self_weight),
    )
    sims = np.array(
        [r.similarity if r.similarity is not None else math.nan for r in ordered], dtype=np.float64
    )
    if np.isnan(sims).all():
        sims = np.zeros(len(ordered))
    sims = np.nan_to_num(sims, nan=float(np.nanmin(sims)))
    dense_scores = window_sum(sims, session, 1 if dense_neighbour else 0, dense_neighbour, 1.0)
    fused = FTS_WEIGHT * scaled(text_scores) + DENSE_WEIGHT * scaled(dense_scores)
    if len(ordered) == 1:  # nothing to scale against: keep the raw evidence
        fused = np.array([FTS_WEIGHT * float(text_scores[0] > 0) + DENSE_WEIGHT * max(float(sims[0]), 0.0)])
    raw = fused + evidence(ordered, reading)
    total = raw / raw.max() if raw.max() > 1.0 else raw
    for row, score, text_score, dense_score in zip(ordered, total, text_scores, dense_scores, strict=True):
        row.score, row.bm25, row.dense = float(score), float(text_score), float(dense_score)
    if windowed and reading is not None and reading.asks_for_set:
        return [ordered[i] for i in spread_sessions(raw, session, SESSION_SPREAD, depth)]
    return sorted(ordered, key=lambda r: (-r.score, r.id))
