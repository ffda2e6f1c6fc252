"""The ranking's cross-language calibration is the output of bench.fit_ranking over its labelled scores
(bench/data/ranking_fit_cross.json, from bench.facts' shape subjects): the code holds what the fit gives, and
the fit, made on the fit subjects, holds on the holdout ones."""

from __future__ import annotations

from bench.fit_ranking import CROSS, fit_cross, load, report
from strataflow.retrieval.ranking import CALIBRATION


def test_the_code_holds_the_fitted_cross_language_calibration() -> None:
    rows, _ = load(None)
    fitted = fit_cross(rows)
    assert (CALIBRATION[CROSS].center, CALIBRATION[CROSS].slope) == (fitted.center, fitted.slope), (
        "ranking.CALIBRATION is not what `python -m bench.fit_ranking` fits: copy its constants"
    )


def test_the_fit_keeps_right_answers_above_one_half_and_unrelated_ones_below_on_the_holdout() -> None:
    rows, under = load(None)
    out = report(rows, under)
    assert out["agrees"]
    for split in ("fit", "holdout"):
        after = out["after"][split]
        assert after["cases"] >= 10 and after["unrelated_queries"] >= 40
        assert after["right_above_0_5"] >= 0.9 and after["max_unrelated_score"] < 0.5, (split, after)
    assert out["after"]["holdout"]["right_above_0_5"] > out["before"]["holdout"]["right_above_0_5"]
