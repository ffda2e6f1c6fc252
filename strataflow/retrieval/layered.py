"""Layered retrieval: L2 items and L3 weekly reports that match a query count for the L1 turns they came from.

An item stores the ids of its source messages (`memory_items.source_message_ids`); a weekly report stores
the ids behind each key event (`key_events[].message_ids`, which the rollup prompt asks every model for);
`source_message_ids` of a report is its whole week and is not used here (a week is too wide to say which
turn answers). Only these structured ids are read, never ids written into a summary's text. Once items and
reports are ranked like any layer (strataflow.retrieval.ranking), the best ``ITEM_TOP`` items add
``WEIGHTS.item`` x their score to each source turn, and the best ``REPORT_TOP`` reports add
``WEIGHTS.report`` x their score to each turn behind them. So a turn that shares no word with the
question, but that an item's statement (or its name and description) matches, moves up.

The lift is in logits, as every weight of the ranking (an item's score is in 0..1), so five items and a
report lift a turn by at most 5 x 0.8 + 1.2 (ranking.WEIGHTS.lift_max). Weights chosen on half of the dev
questions of the dialog-recall benchmark (docs/retrieval-quality.md, bench.fit_ranking): with the offline
extractor's items, which are few and noisy for chat, a larger item weight cost recall at k = 5; a model that
writes better items lifts more.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from strataflow.retrieval.ranking import WEIGHTS, Candidate, RankingWeights

ITEM_TOP = 5
REPORT_TOP = 1


def lineage_lift(
    items: Sequence[Candidate], reports: Sequence[Candidate], weights: RankingWeights = WEIGHTS
) -> dict[int, float]:
    """message_id -> lift in logits, from items and reports ranked best first (their `score` set by rank)."""
    lift: dict[int, float] = defaultdict(float)
    for item in items[:ITEM_TOP]:
        for message_id in _meta(item).get("source_message_ids") or []:
            lift[int(message_id)] += weights.item * item.score
    for report in reports[:REPORT_TOP]:
        for message_id in report_message_ids(_meta(report)):
            lift[message_id] += weights.report * report.score
    return dict(lift)


def report_message_ids(meta: dict[str, Any]) -> set[int]:
    """The messages behind a report's key events (`key_events[].message_ids`, gathered by layer_sql)."""
    return {int(i) for i in meta.get("event_message_ids") or [] if str(i).lstrip("-").isdigit()}


def _meta(candidate: Candidate) -> dict[str, Any]:
    meta = candidate.payload.get("meta")
    return meta if isinstance(meta, dict) else {}
