"""The embedding of an L2 item, computed when the item is written (strataflow.memory.store), so an item is
found by meaning the moment it is saved or extracted, with no separate embed run in between.

ITEM_TEXT is the one definition of the text an item is embedded from, as SQL over the item's columns: the
embed stage (strataflow/pipeline/embed.py) selects it, expiry and forget hash it to find the embedding_cache
rows still in use, and a write evaluates it over the values it is about to store (item_text), so the three
can never disagree: the statement trimmed of white space (ASCII, no-break and ideographic spaces), or ``key
words: value`` when there is none (a string value as it is, any other as jsonb's text).

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
from sqlalchemy import Connection, text

from strataflow.config import Settings
from strataflow.llm.embeddings import get_embedder, model_for_text

# {r} is a table alias and a dot, or nothing.
ITEM_TEXT = (
    "coalesce(nullif(btrim({r}statement, E' \\t\\n\\r\\f\\u000b\\u00a0\\u3000'), ''), "
    "replace({r}key, '_', ' ') || ': ' || "
    "case when jsonb_typeof({r}value) = 'string' then {r}value #>> '{{}}' "
    "else coalesce(cast({r}value as text), 'null') end)"
)
SELECT_ITEM_TEXT = text(
    "select "
    + ITEM_TEXT.format(r="")
    + " from (select cast(:statement as text) as statement, cast(:key as text) as key,"
    " cast(:value as jsonb) as value) as item"
)


def item_text(conn: Connection, statement: str | None, key: str, value: Any) -> str:
    """The text ITEM_TEXT gives for these values (evaluated by the database: the one definition)."""
    params = {"statement": statement, "key": key, "value": json.dumps(value, ensure_ascii=False)}
    return str(conn.execute(SELECT_ITEM_TEXT, params).scalar_one())


def item_vector(
    conn: Connection, settings: Settings, statement: str | None, key: str, value: Any
) -> tuple[np.ndarray, str]:
    """(vector, model name) of an item's text under the model that embeds it (model_for_text: the CJK
    model for CJK text, else the default one)."""
    text = item_text(conn, statement, key, value)
    model = model_for_text(settings, text)
    vector = get_embedder(settings, model).encode([text])[0]
    return np.asarray(vector, dtype=np.float32), model
