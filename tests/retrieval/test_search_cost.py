"""What one search costs besides its answer, asserted without timing: which ids it binds, which metadata it
builds, and that the cyclic garbage collector never runs in the middle of it (in a process holding the
embedding model a full collection took 300-400 ms, one small namespace-wide search in five)."""

from __future__ import annotations

import gc
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from types import FrameType
from typing import Any

import numpy as np
from sqlalchemy import Connection, event, text

from strataflow.memory.store import upsert_item
from strataflow.retrieval import search as search_module
from strataflow.retrieval.layered import ITEM_TOP
from strataflow.retrieval.search import search

TOPICS = (
    "The quarterly budget review moved to Thursday afternoon.",
    "I bought new running shoes for the marathon in October.",
    "Our team switched the CI pipeline to a faster runner.",
    "We need to renew the SSL certificates before they expire.",
)
# The function that holds a search's rows: the collector may run once it has returned (only the hits are
# left then, and a young collection of them is cheap), never while it runs. Before the pause it was `search`.
SEARCH_WORK = getattr(search_module, "_ranked_hits", search_module.search).__code__


def unit_vectors(n: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(n, 384)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def namespace_rows(conn: Connection, settings: Any, namespace: str, write_messages: Any, items: int) -> None:
    """A small namespace (every layer scored exactly): 120 turns over 6 subjects and `items` L2 items."""
    messages = [
        {
            "content": f"{TOPICS[n % len(TOPICS)]} (turn {n})",
            "subject_id": f"s{n % 6}",
            "conversation_id": f"c{n % 6}",
            "source_message_id": f"m{n}",
        }
        for n in range(120)
    ]
    write_messages(conn, settings, namespace, messages, unit_vectors(len(messages), 1))
    for n, vector in enumerate(unit_vectors(items, 2)):
        statement = f"Prefers {TOPICS[n % len(TOPICS)].lower()} number {n}"
        upsert_item(
            conn,
            namespace=namespace,
            subject_id=f"s{n % 6}",
            kind="preference",
            key=f"topic_{n}",
            value=statement,
            statement=statement,
            event_at=datetime(2026, 3, 2, tzinfo=UTC),
        )
        conn.execute(
            text("update memory_items set embedding = :v where namespace = :ns and key = :key"),
            {"v": vector, "ns": namespace, "key": f"topic_{n}"},
        )


def bound_lists(statements: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, int]:
    """The longest list bound under each parameter name over the recorded statements."""
    longest: dict[str, int] = {}
    for _, params in statements:
        for name, value in (params or {}).items():
            if isinstance(value, list | tuple):
                longest[name] = max(longest.get(name, 0), len(value))
    return longest


def searching(frame: FrameType | None) -> bool:
    """Whether the search's work is on the stack of this frame."""
    while frame is not None:
        if frame.f_code is SEARCH_WORK:
            return True
        frame = frame.f_back
    return False


def test_an_exact_search_binds_no_id_list_of_its_scope_and_reads_metadata_for_the_rows_it_shows(
    conn, settings, namespace, write_messages
):
    namespace_rows(conn, settings, namespace, write_messages, items=30)
    recorded: list[tuple[str, dict[str, Any]]] = []

    def record(_conn: Any, _cursor: Any, statement: str, params: Any, _context: Any, _many: bool) -> None:
        recorded.append((statement, params))

    event.listen(conn, "before_cursor_execute", record)
    try:
        hits = search(conn, settings, namespace, "budget review", k=3, query_embedding=unit_vectors(1, 3)[0])
    finally:
        event.remove(conn, "before_cursor_execute", record)

    assert hits and all(h.metadata["exact"] for h in hits)
    # Similarities are read by the scope's filters (before: every id of the scope, 120 turns and 30 items,
    # probed in each weekly partition's primary key); metadata only for the best rows of items and reports.
    assert all(n <= max(3, ITEM_TOP) for n in bound_lists(recorded).values()), bound_lists(recorded)
    items = search(
        conn,
        settings,
        namespace,
        "prefers budget review",
        layers=("items",),
        k=3,
        query_embedding=unit_vectors(1, 3)[0],
    )
    assert len(items) == 3
    assert all(h.metadata["table"] == "memory_items" and h.metadata["item_id"] == h.id for h in items)
    assert all(h.metadata["key"].startswith("topic_") for h in items)


def test_a_search_never_runs_the_cyclic_collector_and_leaves_it_as_it_found_it(
    conn, settings, namespace, write_messages
):
    namespace_rows(conn, settings, namespace, write_messages, items=12)
    collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and searching(sys._getframe()):
            collections.append(info["generation"])

    query = unit_vectors(1, 4)[0]
    gc.enable()
    gc.callbacks.append(count)
    try:
        for _ in range(3):  # 120 turns read and ranked each time: thousands of containers allocated
            assert search(conn, settings, namespace, "budget review", k=5, query_embedding=query)
        assert gc.isenabled()
        gc.disable()
        assert search(conn, settings, namespace, "budget review", k=5, query_embedding=query)
        assert not gc.isenabled()  # paused by someone else before the search: still paused
    finally:
        gc.callbacks.remove(count)
        gc.enable()

    assert collections == []
