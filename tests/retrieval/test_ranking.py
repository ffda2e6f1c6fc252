"""The pure ranking functions behind retrieval: the absolute score, coverage windows, evidence."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from strataflow.retrieval.query_reading import Period, QueryReading
from strataflow.retrieval.ranking import (
    CALIBRATION,
    DEFAULT_MODEL,
    WEIGHTS,
    Candidate,
    absolute_score,
    coverage,
    evidence,
    neighbour_order,
    rank,
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


def test_the_score_is_in_the_unit_interval_and_rises_with_similarity_words_and_evidence():
    sims = np.linspace(-1.0, 1.0, 41)
    scores = [absolute_score(float(s)) for s in sims]
    assert all(0.0 < s < 1.0 for s in scores)
    assert all(a < b for a, b in zip(scores, scores[1:], strict=False))  # monotone in dense
    assert absolute_score(0.4, coverage=0.5) > absolute_score(0.4)
    assert absolute_score(0.4, boost=0.8) > absolute_score(0.4)
    assert absolute_score(0.4, coverage=5.0, boost=99.0) == absolute_score(0.4, coverage=1.0, boost=99.0)
    center = CALIBRATION[DEFAULT_MODEL].center
    assert absolute_score(center) == pytest.approx(0.5)  # what 0.5 means: the calibration's center


def test_a_rows_score_does_not_depend_on_the_other_rows():
    alone = rank([turn(1, {"cat": 1}, sim=0.55)], ["cat", "dora"], windowed=False)[0].score
    crowd = [turn(1, {"cat": 1}, sim=0.55)] + [
        turn(i, {"cat": 2, "dora": 1}, sim=0.2 + i / 100) for i in range(2, 40)
    ]
    assert next(r for r in rank(crowd, ["cat", "dora"], windowed=False) if r.id == 1).score == alone


def test_a_clear_dense_gap_is_not_outvoted_by_words():
    # the related row shares no word with the query; the unrelated one shares all of them
    related = turn(1, {}, sim=0.05 + WEIGHTS.lexical / CALIBRATION[DEFAULT_MODEL].slope + 0.01)
    wordy = turn(2, {"peanut": 1, "dora": 1}, sim=0.05)
    ranked = rank([wordy, related], ["peanut", "dora"], windowed=False)
    assert [r.id for r in ranked] == [1, 2]


def test_coverage_lets_a_reply_borrow_its_neighbours_words_at_a_discount():
    present = np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0], [0.0, 1.0]])
    session = np.array([0, 0, 0, 1])
    got = coverage(present, session, 2, np.array([1.0, 1.0]))
    assert got.tolist() == [0.5, 0.25, 0.25, 0.5]  # row 3 is another session: row 2 cannot borrow from it
    assert coverage(present, session, 0, np.array([1.0, 1.0])).tolist() == [0.5, 0.0, 0.0, 0.5]


def test_rank_lets_a_short_reply_borrow_the_words_of_the_turn_that_asked():
    rows = [
        turn(1, {"holiday": 1}, sim=0.2),  # the question turn
        turn(2, {}, sim=0.3),  # the short reply: no query word of its own
        turn(11, {}, sim=0.3, group="far", minutes=500),
    ]
    ranked = rank(rows, ["holiday"], windowed=True)
    assert ranked[0].id == 1
    assert next(r for r in ranked if r.id == 2).score > next(r for r in ranked if r.id == 11).score
    assert all(0 <= r.score <= 1 for r in ranked)


def test_rank_handles_rows_without_embeddings():
    ranked = rank([turn(1, {"x": 1}, sim=None), turn(2, {}, sim=None)], ["x"], windowed=False)
    assert [r.id for r in ranked] == [1, 2]
    assert ranked[0].score > ranked[1].score


def test_evidence_adds_the_speaker_time_period_and_lineage_of_each_row():
    at = datetime(2026, 3, 2, tzinfo=UTC)
    reading = QueryReading(
        speakers=frozenset({"Nora"}),
        asks_when=True,
        period=Period(at - timedelta(days=1), at + timedelta(days=1)),
    )
    rows = [
        Candidate(1, "c", at, 0.5, 5, {}, speaker="Nora", text="went yesterday", lift=0.4),
        Candidate(2, "c", at - timedelta(days=9), 0.5, 5, {}, speaker="Ben", text="sounds great"),
    ]
    assert evidence(rows, reading).tolist() == pytest.approx(
        [WEIGHTS.speaker + WEIGHTS.time + WEIGHTS.period + 0.4, 0.0]
    )
    both = QueryReading(speakers=frozenset({"Nora", "Ben"}))  # two named people: no speaker evidence
    assert evidence(rows, both).tolist() == [0.4, 0.0]


def test_each_model_is_calibrated_on_its_own_scale():
    e5 = CALIBRATION["multilingual-e5-small"]
    # a compressed model: its center scores 0.5 like the default model's center
    assert absolute_score(e5.center, model="multilingual-e5-small") == pytest.approx(0.5)
    assert absolute_score(0.95, model="multilingual-e5-small") > 0.9
    assert absolute_score(0.75, model="multilingual-e5-small") < 0.1
    e5_row = Candidate(1, "", None, 0.88, 5, {"猫": 1}, model="multilingual-e5-small")
    ranked = rank([e5_row], ["猫"], windowed=False)[0]
    assert ranked.score == pytest.approx(absolute_score(0.88, model="multilingual-e5-small"))


def test_a_query_naming_the_subject_gets_the_reference_back_on_every_row_without_reordering():
    rows = [turn(1, {}, sim=0.30), turn(2, {}, sim=0.25)]
    plain = {c.id: c.score for c in rank([turn(1, {}, sim=0.30), turn(2, {}, sim=0.25)], [], windowed=False)}
    named = rank(rows, [], windowed=False, reading=QueryReading(names_subject=True))
    assert [c.id for c in named] == [1, 2]  # the same order: the reference is the same for every row
    reference = WEIGHTS.subject_reference / CALIBRATION[DEFAULT_MODEL].slope
    assert reference > 0
    for c in named:  # and worth exactly the reference (in the model's cosine: reference / slope)
        assert c.score > plain[c.id]
        assert c.score == pytest.approx(absolute_score((0.30 if c.id == 1 else 0.25) + reference))
