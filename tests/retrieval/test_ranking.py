"""The pure ranking functions behind hybrid retrieval: windows, BM25, scaling, fusion, evidence, spread."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from strataflow.retrieval.query_reading import Period, QueryReading
from strataflow.retrieval.ranking import (
    PERIOD_WEIGHT,
    SPEAKER_WEIGHT,
    TIME_WEIGHT,
    Candidate,
    bm25,
    evidence,
    neighbour_order,
    rank,
    scaled,
    spread_sessions,
    window_sum,
)

T0 = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)


def turn(
    i: int, tf: dict[str, int], sim: float | None = 0.1, group: str = "c1", minutes: int = 0
) -> Candidate:
    return Candidate(
        id=i, group=group, event_at=T0 + timedelta(minutes=minutes or i), similarity=sim, doc_len=5, tf=tf
    )


def test_neighbour_order_starts_a_new_session_after_a_long_gap_or_another_conversation():
    rows = [turn(3, {}, minutes=3), turn(1, {}, minutes=1), turn(2, {}, minutes=200), turn(4, {}, group="c2")]
    ordered, session = neighbour_order(rows)
    assert [r.id for r in ordered] == [1, 3, 2, 4]
    assert session.tolist() == [0, 0, 1, 2]


@pytest.mark.parametrize(
    ("width", "expected"),
    [
        (0, [2.0, 4.0, 6.0, 8.0]),  # no window: own value times the self weight
        (1, [4.0, 8.0, 8.0, 8.0]),  # row 2 gets row 1 but not row 3, which is another session
        (2, [7.0, 8.0, 9.0, 8.0]),  # row 0 reaches row 2; row 3 stays alone
    ],
)
def test_window_sum_never_crosses_a_session_boundary(width, expected):
    values = np.array([1.0, 2.0, 3.0, 4.0])
    session = np.array([0, 0, 0, 1])
    assert window_sum(values, session, width, 1.0, 2.0).tolist() == expected


def test_bm25_weighs_rare_terms_above_common_ones():
    # columns: a common word (in every row), a rare word (in one row)
    tf = np.array([[1, 0], [1, 0], [1, 1], [1, 0]], dtype=float)
    scores = bm25(tf, np.array([5.0, 5.0, 5.0, 5.0]))
    assert scores.argmax() == 2
    assert scores[2] - scores[0] > scores[0]  # the rare term is worth more than the common one


def test_scaled_maps_to_the_unit_interval_and_a_constant_to_zero():
    assert scaled(np.array([2.0, 4.0, 3.0])).tolist() == [0.0, 1.0, 0.5]
    assert scaled(np.array([7.0, 7.0])).tolist() == [0.0, 0.0]


def test_rank_fuses_text_and_dense_and_lets_a_reply_borrow_its_questions_words():
    rows = [
        turn(1, {"holiday": 1, "lisbon": 0}, sim=0.2),  # the question turn
        turn(2, {}, sim=0.3),  # the short reply: no query word of its own
        turn(3, {}, sim=0.1),
        turn(10, {}, sim=0.9, group="other"),  # semantically close, alone
        turn(11, {}, sim=0.0, group="far", minutes=500),
    ]
    ranked = rank(rows, ["holiday"], windowed=True)
    order = [r.id for r in ranked]
    assert order[0] == 1
    assert order.index(2) < order.index(11)
    assert ranked[0].score == pytest.approx(max(r.score for r in ranked)) and all(
        0 <= r.score <= 1 for r in ranked
    )
    assert next(r for r in ranked if r.id == 2).bm25 > 0.0
    unwindowed = rank(rows, ["holiday"], windowed=False)  # (rescoring updates the same candidates)
    assert next(r for r in unwindowed if r.id == 2).bm25 == 0.0


def test_rank_handles_rows_without_embeddings_and_a_single_row():
    assert [
        r.id for r in rank([turn(1, {"x": 1}, sim=None), turn(2, {}, sim=None)], ["x"], windowed=False)
    ] == [1, 2]
    single = rank([turn(5, {"x": 2}, sim=0.5)], ["x"], windowed=True)
    assert single[0].score == pytest.approx(0.6 + 0.4 * 0.5)


def test_a_set_question_spreads_the_top_over_sessions_and_other_questions_do_not():
    # session 0 holds three strong turns, session 1 one slightly weaker: a set question takes session 1's
    # turn second, any other question keeps the plain order
    scores = np.array([1.0, 0.99, 0.98, 0.985])
    session = np.array([0, 0, 0, 1])
    assert spread_sessions(scores, session, penalty=0.02, depth=4) == [0, 3, 1, 2]
    assert spread_sessions(scores, session, penalty=0.0, depth=4) == [0, 1, 3, 2]


def test_evidence_adds_the_speaker_time_period_and_lineage_of_each_row():
    at = datetime(2026, 3, 2, tzinfo=UTC)
    reading = QueryReading(
        speakers=frozenset({"Nora"}),
        asks_when=True,
        period=Period(at - timedelta(days=1), at + timedelta(days=1)),
    )
    rows = [
        Candidate(1, "c", at, 0.5, 5, {}, speaker="Nora", text="went yesterday", lift=0.05),
        Candidate(2, "c", at - timedelta(days=9), 0.5, 5, {}, speaker="Ben", text="sounds great"),
    ]
    assert evidence(rows, reading).tolist() == pytest.approx(
        [SPEAKER_WEIGHT + TIME_WEIGHT + PERIOD_WEIGHT + 0.05, 0.0]
    )
    both = QueryReading(speakers=frozenset({"Nora", "Ben"}))  # two named people: no speaker evidence
    assert evidence(rows, both).tolist() == [0.05, 0.0]
