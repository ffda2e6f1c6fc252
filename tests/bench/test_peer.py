"""bench.peer's data: every question has one right memory, and a bulk-loaded memory is the row strataflow's
own write call makes for the same text (the side by side compares strataflow as it stores memories)."""

from __future__ import annotations

import numpy as np
from sqlalchemy import Connection, text

from bench import peer
from bench.peer_data import TOPICS, memories, people
from strataflow.adapters import mem0_names as adapters
from strataflow.memory import api

# The columns a search or a reader sees (not the ids, times or embedding, which differ by design).
COMPARED = (
    "subject_id, agent_id, kind, key, value, statement, category, importance, confidence, status, source, "
    "version, fts, metadata, name, description, entry_type, is_shared, keys"
)


def test_every_question_asks_for_one_memory() -> None:
    made = memories(3000, seed=7)
    assert len({m.text for m in made}) == 3000
    assert len({m.question for m in made}) == 3000  # one (who, topic) pair each: one right answer
    assert made == memories(3000, seed=7)  # the same data in both stores and in every run
    assert len(people()) * len(TOPICS) >= 2_000_000  # room for the 1M-row run


def test_a_bulk_row_is_the_row_the_write_call_makes(conn: Connection, namespace: str) -> None:
    made = memories(3, seed=11)
    written = [
        api.create_memory(
            conn, namespace, "someone", "user", adapters.mem0_entry_name(m.text), m.text,
            metadata=adapters.mem0_metadata(None, None, None),
        ).item.id
        for m in made
    ]  # fmt: skip
    conn.execute(text(peer.CREATE_STAGE))
    vectors = np.random.default_rng(0).normal(size=(3, peer.DIM)).astype(np.float32)
    peer.stage(conn, made, vectors)
    peer.insert_items(conn, written[0], namespace=namespace, subject="someone-bulk")

    def rows(subject: str) -> list[tuple[object, ...]]:
        found = conn.execute(
            text(
                f"select {COMPARED} from memory_items where namespace = :ns and subject_id = :s order by key"
            ),
            {"ns": namespace, "s": subject},
        )
        return [row[1:] for row in found]

    assert rows("someone-bulk") == rows("someone")
    loaded = conn.execute(
        text("select count(*) from memory_items where namespace = :ns and embedding is not null"),
        {"ns": namespace},
    ).scalar_one()
    assert loaded == 3
