"""The bound the ranking's docstring states, swept over seeded random rows and readings: a row whose dense
logit (its parts dense + neighbours + subject) is ahead by more than WEIGHTS.lexical + WEIGHTS.boost_max
stays ahead whatever the other's words and evidence; and the bound is tight enough to matter (evidence does
pass a closer row)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from strataflow.retrieval.query_reading import Period, QueryReading
from strataflow.retrieval.ranking import WEIGHTS, Candidate, absolute_score, rank

T0 = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)
LEXEMES = ["job", "leeds", "bee"]
DENSE = ("dense", "neighbours", "subject")


def random_rows(rng: np.random.Generator, n: int) -> list[Candidate]:
    return [
        Candidate(
            id=i, group=f"c{rng.integers(2)}", event_at=T0 + timedelta(minutes=int(rng.integers(0, 600))),
            similarity=None if rng.random() < 0.05 else float(rng.uniform(-0.1, 0.95)), doc_len=5,
            tf={w: 1 for w in LEXEMES if rng.random() < 0.4}, speaker=str(rng.choice(["Ann", "Bo"])),
            text="at 5pm" if rng.random() < 0.3 else "",
            lift=float(rng.uniform(0, 8.0)) if rng.random() < 0.3 else 0.0,
            model="multilingual-e5-small" if rng.random() < 0.2 else None,
        )
        for i in range(n)
    ]  # fmt: skip


def dense_logit(row: Candidate) -> float:
    return sum(row.parts.get(name, 0.0) for name in DENSE)


def test_no_evidence_lifts_a_row_over_one_ahead_by_more_than_the_stated_bound() -> None:
    rng = np.random.default_rng(44)
    bound = WEIGHTS.lexical + WEIGHTS.boost_max
    checked = 0
    for _ in range(300):
        reading = QueryReading(
            speakers=frozenset({"Ann"}) if rng.random() < 0.5 else frozenset(),
            asks_when=bool(rng.random() < 0.5),
            period=Period(T0, T0 + timedelta(hours=3)) if rng.random() < 0.5 else None,
            names_subject=bool(rng.random() < 0.5),
        )  # fmt: skip
        ranked = rank(random_rows(rng, 12), LEXEMES, windowed=bool(rng.random() < 0.5), reading=reading)
        for a in ranked:
            for b in ranked:
                if dense_logit(a) - dense_logit(b) > bound:
                    assert a.score > b.score, (a, b)
                    checked += 1
    assert checked > 1000


def test_the_bound_is_wide_evidence_can_pass_a_closer_row() -> None:
    """The issue's example: cosine 0.20 with speaker, time, period and lineage over a plain 0.50."""
    assert absolute_score(0.20, boost=WEIGHTS.boost_max) > absolute_score(0.50)
