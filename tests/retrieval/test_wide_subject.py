"""A subject with more items than a search scores exactly (bench.peer's one user of 100k memories): its scope
is read once, capped, and then remembered as wide, so later searches go straight to the candidates (HNSW
nearest and full-text matches) with the same answer; the full-text candidates are the rows holding every
rare word of the question before those holding one."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import Connection, event, text

from strataflow.memory.store import upsert_item
from strataflow.retrieval import wide
from strataflow.retrieval.layer_sql import QUERY_LEXEMES, Scope
from strataflow.retrieval.search import query_terms, search

PEOPLE = ("Nora Pham", "Nora Costa", "Ivan Pham", "Lena Berg", "Omar Haddad", "Ines Moreau")
TOPICS = ("drinks oat milk lattes every morning", "lives in Porto now", "keeps a parrot called Kiwi")


def items(conn: Connection, namespace: str, subject: str) -> None:
    """One item per (person, topic), each with a vector of its own."""
    vectors = np.random.default_rng(5).normal(size=(len(PEOPLE) * len(TOPICS), 384)).astype(np.float32)
    for n, (person, topic) in enumerate((p, t) for p in PEOPLE for t in TOPICS):
        statement = f"{person} {topic}."
        upsert_item(
            conn, namespace=namespace, subject_id=subject, kind="fact", key=f"fact_{n}", value=statement,
            statement=statement, event_at=datetime(2026, 3, 2, tzinfo=UTC),
        )  # fmt: skip
        conn.execute(
            text("update memory_items set embedding = :v where namespace = :ns and key = :key"),
            {"v": vectors[n] / np.linalg.norm(vectors[n]), "ns": namespace, "key": f"fact_{n}"},
        )


@contextmanager
def statements(conn: Connection) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(*args: Any) -> None:
        seen.append(args[2])

    event.listen(conn, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(conn, "before_cursor_execute", record)


def test_a_wide_subject_is_read_once_then_searched_through_its_candidates(
    conn: Connection, settings: Any, namespace: str
) -> None:
    items(conn, namespace, "one-user")
    query = "Where does Nora Pham live?"
    vector = np.random.default_rng(9).normal(size=384).astype(np.float32)

    def ask() -> tuple[list[tuple[int, float]], list[str]]:
        with statements(conn) as seen:
            hits = search(
                conn, settings, namespace, query, subject_id="one-user", layers=("items",), k=5,
                query_embedding=vector, exact_limit=10,
            )  # fmt: skip
        return [(hit.id, hit.score) for hit in hits], seen

    first, read = ask()
    again, later = ask()
    assert len([s for s in read if "limit %(cap)s" in s]) == 1  # 18 items > exact_limit 10: it overflowed
    assert not any("limit %(cap)s" in s for s in later)  # remembered: no read, no probe within the ttl
    assert again == first and first
    top = conn.execute(text("select statement from memory_items where item_id = :i"), {"i": first[0][0]})
    assert top.scalar_one().startswith("Nora Pham ")  # the words decide: the vectors are random

    upsert_item(
        conn, namespace=namespace, subject_id="small-user", kind="fact", key="pet", value="a cat",
        statement="Nora Pham keeps a cat.", event_at=datetime(2026, 3, 2, tzinfo=UTC),
    )  # fmt: skip
    small = search(
        conn, settings, namespace, "Nora Pham", subject_id="small-user", layers=("items",), k=5,
        query_embedding=vector, exact_limit=10,
    )  # fmt: skip
    assert small and all(hit.metadata["exact"] for hit in small)  # another subject is not taken for wide


def test_text_candidates_hold_every_rare_word_before_any(conn: Connection, namespace: str) -> None:
    items(conn, namespace, "one-user")
    scope = Scope(subject=True)

    def candidates(query: str) -> set[str]:
        params = {
            "namespace": namespace, "subject_id": "one-user", "agent_id": None, "also_visible": [],
            **query_terms(query),
        }  # fmt: skip
        lexemes = conn.execute(QUERY_LEXEMES, params).scalar_one()
        ids = wide.text_candidates(conn, ["items"], scope, params, 10, lexemes)["items"]
        found = conn.execute(
            text("select statement from memory_items where item_id = any(:ids)"), {"ids": ids}
        ).scalars()
        return {statement.split(" ")[0] + " " + statement.split(" ")[1] for statement in found}

    assert candidates("Nora Pham") == {"Nora Pham"}  # both names: that person's rows alone
    assert candidates("Nora Smith") == {"Nora Pham", "Nora Costa"}  # no row holds both: either
