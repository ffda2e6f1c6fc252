"""bench.peer's data: every question has one right memory, and a bulk-loaded memory is the row strataflow's
own write call makes for the same text (the side by side compares strataflow as it stores memories)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
from sqlalchemy import Connection, text

from bench import peer
from bench.peer_data import TOPICS, memories, people
from strataflow.adapters import mem0_names as adapters
from strataflow.config import Settings
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


def test_the_vectors_are_encoded_once_and_kept_by_digest(settings: Settings, tmp_path: Path) -> None:
    home = settings.model_copy(update={"home": tmp_path})
    texts = [m.text for m in memories(3, seed=5)]
    digest = hashlib.sha256("\n".join([peer.MODEL, *texts]).encode()).hexdigest()[:16]
    kept = tmp_path / "bench-cache" / f"peer-vectors-{digest}.npy"  # the lead's 1M file is named so
    assert peer.vectors_path(tmp_path, texts) == kept

    encoded = peer.encode(home, texts)
    assert encoded.shape == (3, peer.DIM) and encoded.dtype == np.float32
    np.testing.assert_array_equal(np.load(kept), encoded)

    marked = np.full((3, peer.DIM), 0.5, dtype=np.float32)  # what only the file can hold
    np.save(kept, marked)
    np.testing.assert_array_equal(peer.encode(home, texts), marked)

    np.save(kept, marked[:2])  # another N's shape: encoded again and the file replaced
    np.testing.assert_allclose(peer.encode(home, texts), encoded, atol=1e-6)
    assert np.load(kept).shape == (3, peer.DIM)
    assert [p.name for p in kept.parent.iterdir()] == [kept.name]
