"""Why a row was recalled: the parts of its logit (ranking.Candidate.parts) add up to it, and its score is
the sigmoid of that sum, whatever evidence it had (a cap on the evidence shows as its own negative part)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from models.memory_items import Explain
from strataflow.retrieval.query_reading import Period, QueryReading
from strataflow.retrieval.ranking import CALIBRATION, DEFAULT_MODEL, WEIGHTS, Candidate, logit_parts, rank

T0 = datetime(2026, 1, 5, 10, 0, tzinfo=UTC)


def turn(i: int, sim: float | None, tf: dict[str, int], speaker: str = "Ann", text: str = "") -> Candidate:
    return Candidate(
        id=i, group="c1", event_at=T0 + timedelta(minutes=i), similarity=sim, doc_len=5, tf=tf,
        speaker=speaker, text=text, lift=0.3 if i == 2 else 0.0,
        model="multilingual-e5-small" if i == 4 else None,
    )  # fmt: skip


def sigmoid(z: float) -> float:
    return 1 / (1 + math.exp(-z))


@pytest.mark.parametrize("windowed", [True, False])
@pytest.mark.parametrize("named", [True, False])
def test_the_parts_add_up_to_the_logit_and_its_sigmoid_is_the_score(windowed: bool, named: bool) -> None:
    rows = [
        turn(1, 0.55, {"bee": 1}, text="yesterday at 5pm"), turn(2, 0.2, {}), turn(3, None, {"bee": 2}),
        turn(4, 0.86, {}, speaker="Bo"), turn(5, 0.41, {"leeds": 1}),
    ]  # fmt: skip
    period = Period(T0, T0 + timedelta(minutes=3))
    reading = QueryReading(speakers=frozenset({"Ann"}), asks_when=True, period=period, names_subject=named)
    ranked = rank(rows, ["bee", "leeds"], windowed=windowed, reading=reading)
    for row in ranked:
        assert row.parts, row
        assert sigmoid(sum(row.parts.values())) == pytest.approx(row.score, abs=1e-9)
        why = Explain.of(row.parts)
        assert sum(why.parts.values()) == pytest.approx(why.logit, abs=0.01)
        assert sigmoid(why.logit) == pytest.approx(row.score, abs=0.01)
    first = next(r for r in ranked if r.id == 1)
    assert {"dense", "lexical", "speaker", "time", "period"} <= set(first.parts)
    assert first.parts["speaker"] > 0 and first.parts["time"] > 0
    if named:
        assert first.parts["subject"] > 0
    assert next(r for r in ranked if r.id == 2).parts["lineage"] > 0


def test_evidence_past_its_cap_shows_as_a_negative_part() -> None:
    slope = CALIBRATION[DEFAULT_MODEL].slope
    parts = logit_parts(0.5, 1.0, {"speaker": WEIGHTS.boost_max, "time": 4.0})
    assert parts["boost_cap"] == pytest.approx(-4.0)
    capped = (0.5 - CALIBRATION[DEFAULT_MODEL].center) * slope + parts["lexical"] + WEIGHTS.boost_max
    assert sum(parts.values()) == pytest.approx(capped)


def test_calibration_is_looked_up_by_the_canonical_model_name() -> None:
    from strataflow.retrieval.ranking import calibration, canonical_model

    e5 = CALIBRATION["multilingual-e5-small"]
    assert canonical_model("intfloat/multilingual-e5-small") == "multilingual-e5-small"
    assert calibration("intfloat/multilingual-e5-small") == e5 == calibration("Multilingual-E5-Small")
    assert calibration("sentence-transformers/all-MiniLM-L6-v2") == CALIBRATION[DEFAULT_MODEL]
    assert calibration("some-org/unknown-model") == CALIBRATION[DEFAULT_MODEL]


def test_a_row_of_an_uncalibrated_model_says_so_in_its_explanation() -> None:
    """A threshold means less on such a row (it is scored as the default model's cosine): explain says so."""
    from strataflow.retrieval.ranking import uncalibrated
    from strataflow.retrieval.search import _as_hits

    assert uncalibrated(None) is None and uncalibrated("intfloat/multilingual-e5-small") is None
    assert uncalibrated("multilingual-e5-small:cross") is None
    note = "uncalibrated model some-org/unknown-model: scored as all-MiniLM-L6-v2"
    assert uncalibrated("some-org/unknown-model") == note
    rows = [turn(1, 0.5, {}), Candidate(2, "c1", T0, 0.5, 5, {}, model="some-org/unknown-model")]
    hits = _as_hits("items", rank(rows, [], windowed=False), exact=True, explain=True)
    assert [(h.id, h.score, h.explain.uncalibrated if h.explain else "-") for h in hits] == [
        (1, hits[0].score, None),
        (2, hits[0].score, note),  # same cosine, same score: it was scored as the default model
    ]
