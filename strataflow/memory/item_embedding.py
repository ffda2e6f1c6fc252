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

One multilingual space (issue 44): an item whose text the default model embeds (English) also gets its vector
under the multilingual model (`multi_model`: settings.embed_cjk_model), `embedding_multi` (sql/400), so a
question in the other language meets it there (strataflow.retrieval.layer_sql); a CJK item's own vector is
already under that model. `encoded_ahead` encodes it with the others, before the write's connection is taken.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np
from sqlalchemy import Connection, text

from strataflow import telemetry
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


# Vectors encoded ahead for a batch of writes (encoded_ahead): text -> (vector, the model that embeds it), and
# (model, text) -> vector for texts embedded under a model given (vectors_under).
_AHEAD: ContextVar[dict[str, tuple[np.ndarray, str]] | None] = ContextVar(
    "strataflow_encoded_ahead", default=None
)
_AHEAD_UNDER: ContextVar[dict[tuple[str, str], np.ndarray] | None] = ContextVar(
    "strataflow_encoded_ahead_under", default=None
)
TRIMMED = " \t\n\r\f\v\u00a0\u3000"  # what ITEM_TEXT's btrim takes off


@contextmanager
def encoded_ahead(
    settings: Settings, statements: Sequence[str], under: Sequence[tuple[str, str]] = ()
) -> Iterator[None]:
    """Within the block, writes whose item text is one of these (non-empty) statements use vectors encoded
    here in one call per model, instead of one encode per write (a batch of store puts); any other text is
    encoded as usual. `under`: (model, text) pairs that `vectors_under` will ask for (a store item's
    texts, each embedded under its item's model), encoded in the same calls."""
    by_model: dict[str, set[str]] = {}
    multi = multi_model(settings)
    for statement in {s.strip(TRIMMED) for s in statements if s.strip(TRIMMED)}:
        model = model_for_text(settings, statement)
        by_model.setdefault(model, set()).add(statement)
        if multi is not None and model != multi:  # its multilingual vector too (item_multi_vector)
            by_model.setdefault(multi, set()).add(statement)
    for model, said in under:
        by_model.setdefault(model, set()).add(said)
    encoded = dict(_AHEAD_UNDER.get() or {})  # an enclosing block's vectors: not encoded again
    wanted = {
        model: sorted(t for t in texts if (model, t) not in encoded) for model, texts in by_model.items()
    }
    if any(wanted.values()):
        with telemetry.timed("embed_on_write"):  # the API's writes encode here: one observation per call
            for model, ordered in wanted.items():
                if not ordered:
                    continue
                vectors: Any = get_embedder(settings, model).encode(ordered)
                for said, vector in zip(ordered, vectors, strict=True):
                    encoded[(model, said)] = np.asarray(vector, dtype=np.float32)
    ahead = {
        said: (vector, model)
        for (model, said), vector in encoded.items()
        if model_for_text(settings, said) == model
    }
    tokens = (_AHEAD.set(ahead), _AHEAD_UNDER.set(encoded))
    try:
        yield
    finally:
        _AHEAD_UNDER.reset(tokens[1])
        _AHEAD.reset(tokens[0])


def vectors_under(settings: Settings, model: str, texts: Sequence[str]) -> list[np.ndarray]:
    """The texts' vectors under `model` (those encoded ahead, the others in one call)."""
    ahead = _AHEAD_UNDER.get() or {}
    missing = sorted({t for t in texts if (model, t) not in ahead})
    fresh: dict[tuple[str, str], np.ndarray] = {}
    if missing:
        with telemetry.timed("embed_on_write"):
            vectors: Any = get_embedder(settings, model).encode(missing)
        fresh = {(model, t): np.asarray(v, dtype=np.float32) for t, v in zip(missing, vectors, strict=True)}
    return [ahead.get((model, t), fresh.get((model, t))) for t in texts]  # type: ignore[misc]


def item_text(conn: Connection, statement: str | None, key: str, value: Any) -> str:
    """The text ITEM_TEXT gives for these values (evaluated by the database: the one definition)."""
    params = {"statement": statement, "key": key, "value": json.dumps(value, ensure_ascii=False)}
    return str(conn.execute(SELECT_ITEM_TEXT, params).scalar_one())


def item_vector(
    conn: Connection, settings: Settings, statement: str | None, key: str, value: Any
) -> tuple[np.ndarray, str]:
    """(vector, model name) of an item's text under the model that embeds it (model_for_text: the CJK
    model for CJK text, else the default one)."""
    ahead = _AHEAD.get()
    trimmed = (statement or "").strip(TRIMMED)
    if ahead is not None and trimmed in ahead:  # a non-empty trimmed statement is ITEM_TEXT's text
        return ahead[trimmed]
    wanted = item_text(conn, statement, key, value)
    model = model_for_text(settings, wanted)
    with telemetry.timed("embed_on_write"):
        vector = get_embedder(settings, model).encode([wanted])[0]
    return np.asarray(vector, dtype=np.float32), model


def multi_model(settings: Settings) -> str | None:
    """The multilingual model every item has a vector under (settings.embed_cjk_model), or None when it is
    unset or the default model itself (every vector is multilingual already)."""
    multi = settings.embed_cjk_model
    return multi if multi and multi != settings.embedding_model else None


def item_multi_vector(
    conn: Connection, settings: Settings, statement: str | None, key: str, value: Any, model: str
) -> tuple[np.ndarray | None, str | None]:
    """(vector, model name) of an item's text under the multilingual model when `model`, the one its own
    embedding is under, is another; (None, None) when its own is multilingual (or there is no such model).
    Encoded ahead (`encoded_ahead`) when the write's caller did, else here."""
    multi = multi_model(settings)
    if multi is None or model == multi:
        return None, None
    ahead = _AHEAD_UNDER.get() or {}
    trimmed = (statement or "").strip(TRIMMED)
    if (multi, trimmed) in ahead:  # a non-empty trimmed statement is ITEM_TEXT's text
        return ahead[(multi, trimmed)], multi
    return vectors_under(settings, multi, [item_text(conn, statement, key, value)])[0], multi
