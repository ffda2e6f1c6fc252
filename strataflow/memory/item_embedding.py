"""The embedding of an L2 item, computed when the item is written (strataflow.memory.store), so an item is
found by meaning the moment it is saved or extracted, with no separate embed run in between.

`item_text` is the one definition of the text an item is embedded from (the embed stage,
strataflow/pipeline/embed.py, uses it too): the statement, or ``key words: value`` when there is none.

A write encodes only when the item's current statement changes (a new item, a changed statement); an
unchanged write, a history-only version and a delete encode nothing, so a rerun of extraction stays free of
encodes. The vector is encoded directly, not looked up in embedding_cache: the write may run as an agent role,
which has no access to that cache (a cache keyed by text alone cannot be scoped to a namespace, sql/091).
Without settings (a caller that gives none) the embedding stays null for the embed stage to fill.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from strataflow.config import Settings
from strataflow.llm.embeddings import get_embedder


def item_text(statement: str | None, key: str, value: Any) -> str:
    """The text an item is embedded from: its statement, or ``key words: value`` when it has none."""
    statement = (statement or "").strip()
    if statement:
        return statement
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return f"{key.replace('_', ' ')}: {shown}"


def item_vector(settings: Settings, statement: str | None, key: str, value: Any) -> tuple[np.ndarray, str]:
    """(vector, model name) of an item's text under the configured embedding model."""
    embedder = get_embedder(settings)
    vector = embedder.encode([item_text(statement, key, value)])[0]
    return np.asarray(vector, dtype=np.float32), embedder.model_name
