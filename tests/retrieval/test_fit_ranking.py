"""Every constant of the ranking that labelled scores decide is the output of bench.fit_ranking over the
committed labelled scores (bench/data/ranking_fit_{facts,cross,locomo,second}.json): the code holds what the
fit gives, the fit holds on the halves it did not see, and the offline replay of LoCoMo is the database
run's."""

from __future__ import annotations

from typing import Any

import pytest

from bench import fit_locomo
from bench.fit_ranking import constants, disagreements, fit, load, tables
from strataflow.retrieval.layered import ITEM_TOP, REPORT_TOP
from strataflow.retrieval.ranking import CALIBRATION, DEFAULT_MODEL, WEIGHTS

# `python -m bench.locomo --data locomo_dev3.json --dump PATH` that made the committed labelled scores
# (2026-12-07, f565397's ranking): the database run's recall per category and overall at k = 5 / 10 / 25 /
# 50, which the offline replay of its labelled scores must give to the decimal.
LOCOMO_RUN = {
    "1": {"5": 45.9, "10": 60.7, "25": 74.3, "50": 81.3},
    "2": {"5": 91.1, "10": 94.4, "25": 98.9, "50": 98.9},
    "3": {"5": 54.8, "10": 59.5, "25": 69.0, "50": 71.4},
    "4": {"5": 81.0, "10": 88.2, "25": 93.8, "50": 96.5},
    "5": {"5": 75.0, "10": 84.8, "25": 91.1, "50": 94.6},
    "overall": {"5": 75.1, "10": 83.3, "25": 90.1, "50": 93.2},
}


@pytest.fixture(scope="module")
def data() -> dict[str, Any]:
    return load()


def test_the_code_holds_every_fitted_constant(data: dict[str, Any]) -> None:
    fitted = fit(data)
    ours, code = constants(fitted.calibration, fitted.weights), constants(CALIBRATION, WEIGHTS)
    differ = {name: (ours[name], code[name]) for name in disagreements(fitted)}
    assert not differ, f"ranking.py is not what `python -m bench.fit_ranking` fits (fit, code): {differ}"


def test_lineage_is_bounded_by_what_the_items_and_the_report_can_add() -> None:
    assert WEIGHTS.lift_max == pytest.approx(ITEM_TOP * WEIGHTS.item + REPORT_TOP * WEIGHTS.report)


def test_the_replay_of_locomo_is_the_database_run(data: dict[str, Any]) -> None:
    prepared = fit_locomo.prepare(data["locomo"], CALIBRATION[DEFAULT_MODEL], WEIGHTS.entry_lexical)
    replayed = fit_locomo.recall(prepared, "all", WEIGHTS)
    assert {
        c: {k: v for k, v in row.items() if k != "questions"} for c, row in replayed.items()
    } == LOCOMO_RUN


@pytest.mark.parametrize("constants_of", ["code", "fit"])
def test_the_constants_hold_on_the_holdout_halves(data: dict[str, Any], constants_of: str) -> None:
    fitted = fit(data) if constants_of == "fit" else None
    calibration, weights = (fitted.calibration, fitted.weights) if fitted else (CALIBRATION, WEIGHTS)
    out = tables(data, calibration, weights)
    for name, splits in out["facts"].items():
        for split, row in splits.items():
            assert row["max_unrelated_score"] < 0.5, (name, split, row)
            if row["cases"]:
                assert row["right_above_0_5"] >= 0.85 and row["top1"] >= 0.8, (name, split, row)
    for split, row in out["shapes_cross"].items():
        assert row["right_above_0_5"] >= 0.9 and row["max_unrelated_score"] < 0.5, (split, row)
    for name, row in out["second_model"].items():  # the second model across languages never costs a question
        assert row["top1_with_second"] >= row["top1_e5"], (name, row)
    assert out["second_model"]["translated_holdout"]["top1_with_second"] >= 0.85
    for split in ("fit", "holdout"):  # the quality check's bar: overall at or above DRAGON + 8 at every k
        dragon = fit_locomo.DRAGON["overall"]
        overall = out["locomo"][split]["overall"]
        assert all(overall[str(k)] >= d + 8 for k, d in zip(fit_locomo.KS, dragon, strict=True)), (
            split,
            overall,
        )
