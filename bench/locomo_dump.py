"""The ranking inputs of `bench.locomo --dump PATH`, for fitting the ranking's few weights offline.

While a question is asked, every call of `strataflow.retrieval.ranking.rank` made by the search is recorded
(items, then reports, then the L1 turns: the order strataflow.retrieval.search ranks them in) with its
candidates, lexemes and the query's reading; after a conversation, the lineage ids of its items and reports
and each turn's LoCoMo id. bench.fit_locomo keeps of it the numbers and ids a weight does not change and
ranks every question again as strataflow.retrieval.ranking.rank and layered.lineage_lift do (the database
run's recall, to the decimal), so a weight can be tried on all questions in a tenth of a second.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import text

from strataflow.retrieval.ranking import WEIGHTS

Call = tuple[bool, list[Any], list[str], Any]  # windowed, candidates, lexemes, reading


class Recorder:
    """The ranking calls of one conversation's questions."""

    def __init__(self, engine: Any, namespace: str) -> None:
        self.engine, self.namespace = engine, namespace
        self.questions: list[dict[str, Any]] = []
        self.calls: list[Call] = []

    def finish(self) -> dict[str, Any]:
        ns = {"ns": self.namespace}
        with self.engine.connect() as conn:
            turns = dict(
                conn.execute(
                    text(
                        "select message_id, source_message_id from conversation_messages "
                        "where namespace = :ns"
                    ),
                    ns,
                ).all()
            )
            items = dict(
                conn.execute(
                    text("select item_id, source_message_ids from memory_items where namespace = :ns"), ns
                ).all()
            )
            reports = dict(
                conn.execute(
                    text(
                        "select r.report_id, coalesce((select jsonb_agg(x) from jsonb_array_elements("
                        "r.key_events) e cross join lateral jsonb_array_elements(case when jsonb_typeof("
                        "e->'message_ids') = 'array' then e->'message_ids' else '[]'::jsonb end) x), "
                        "'[]'::jsonb) from weekly_reports r where r.namespace = :ns"
                    ),
                    ns,
                ).all()
            )
        return {
            "namespace": self.namespace,
            "questions": self.questions,
            "turns": {int(k): str(v) for k, v in turns.items()},
            "item_sources": {int(k): [int(i) for i in v or []] for k, v in items.items()},
            "report_events": {
                int(k): [int(i) for i in v or [] if str(i).isdigit()] for k, v in reports.items()
            },
        }


@contextmanager
def recording(recorder: Recorder | None, question: dict[str, Any]) -> Iterator[None]:
    """Record the ranking calls of one search (nothing when recorder is None)."""
    if recorder is None:
        yield
        return
    import strataflow.retrieval.search as search_module

    original = search_module.rank
    calls: list[Call] = []

    def spy(rows: Any, lexemes: Any, windowed: bool, reading: Any = None, weights: Any = WEIGHTS) -> Any:
        calls.append((windowed, list(rows), list(lexemes), reading))
        return original(rows, lexemes, windowed, reading=reading, weights=weights)

    search_module.rank = spy
    try:
        yield
    finally:
        search_module.rank = original
    recorder.questions.append(
        {
            "question": question["question"],
            "category": str(question.get("category", "none")),
            "evidence": [str(e) for e in question.get("evidence") or []],
            "calls": calls,
        }
    )


def save(path: Path, conversations: list[dict[str, Any]]) -> None:
    with path.open("wb") as out:
        pickle.dump(conversations, out)


def load(path: Path) -> list[dict[str, Any]]:
    with path.open("rb") as source:
        return pickle.load(source)  # noqa: S301 (our own dump)
