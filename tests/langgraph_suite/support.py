"""What LangGraph's store tests get instead of a PostgresStore (copied beside them as lg_support.py by
prepare.py): a StrataflowStore (AsyncStrataflowStore for the async file) over the strataflow API at
$LG_SUITE_API, with a key of a role made for the one test and granted a namespace of its own, so each test
starts from an empty store as each of LangGraph's starts from a new database. The store's ttl_config and
index configuration are the ones LangGraph's fixtures give PostgresStore."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from embed_test_utils import CharacterEmbeddings
from sqlalchemy import Engine

from strataflow.integrations.langgraph import AsyncStrataflowStore, StrataflowStore

DEFAULT_URI = "strataflow"  # what LangGraph's files import; no test here connects to PostgreSQL
VECTOR_TYPES = ["vector", "halfvec"]
TTL_MINUTES = 6 / 60  # the files' TTL_SECONDS / 60
STORE_TTL = {"default_ttl": TTL_MINUTES, "refresh_on_read": True, "sweep_interval_minutes": TTL_MINUTES / 2}
VECTOR_TTL = {"default_ttl": 2, "refresh_on_read": True}

__all__ = ["CharacterEmbeddings", "DEFAULT_URI", "VECTOR_TYPES"]


@cache
def _engine() -> Engine:
    from strataflow.config import load_settings
    from strataflow.db.engine import engine_for

    return engine_for(load_settings(home=Path(os.environ["STRATAFLOW_HOME"])))


def _key() -> str:
    """A key of a new agent role granted a new namespace: an empty store."""
    from strataflow.db import roles
    from strataflow.service import keys

    role = f"lg_{uuid.uuid4().hex[:10]}"
    with _engine().begin() as conn:
        roles.create_role(conn, role, "agent", with_password=False)
        roles.grant(conn, role, role)
        return keys.create_key(conn, role, role, None)[0]


def _index(fake: CharacterEmbeddings, fields: list[str] | None) -> Any:
    return {"dims": fake.dims, "embed": fake, "fields": fields}


@pytest.fixture(name="fake_embeddings")
def fake_embeddings() -> CharacterEmbeddings:
    return CharacterEmbeddings(dims=500)


@pytest.fixture(name="store")
def sync_store() -> Iterator[StrataflowStore]:
    store = StrataflowStore(url=os.environ["LG_SUITE_API"], api_key=_key(), ttl_config=STORE_TTL)  # type: ignore[arg-type]
    yield store
    store.close()


@pytest.fixture(name="store")
async def async_store() -> AsyncIterator[AsyncStrataflowStore]:
    store = AsyncStrataflowStore(url=os.environ["LG_SUITE_API"], api_key=_key(), ttl_config=STORE_TTL)  # type: ignore[arg-type]
    yield store
    await store.aclose()


@contextmanager
def sync_create_vector_store(
    vector_type: str,
    distance_type: str,
    fake_embeddings: CharacterEmbeddings,
    text_fields: list[str] | None = None,
    enable_ttl: bool = True,
) -> Iterator[StrataflowStore]:
    """The vector store of LangGraph's helper: its index configuration; vector and distance types are
    PostgresStore's column choices, which the server's own vectors make moot."""
    ttl = VECTOR_TTL if enable_ttl else None
    store = StrataflowStore(
        url=os.environ["LG_SUITE_API"], api_key=_key(), index=_index(fake_embeddings, text_fields),
        ttl_config=ttl,  # type: ignore[arg-type]
    )  # fmt: skip
    yield store
    store.close()


@asynccontextmanager
async def async_create_vector_store(
    vector_type: str,
    distance_type: str,
    fake_embeddings: CharacterEmbeddings,
    text_fields: list[str] | None = None,
) -> AsyncIterator[AsyncStrataflowStore]:
    store = AsyncStrataflowStore(
        url=os.environ["LG_SUITE_API"], api_key=_key(), index=_index(fake_embeddings, text_fields)
    )
    yield store
    await store.aclose()


@pytest.fixture(name="vector_store", params=[("vector", "cosine")], ids=lambda p: f"{p[0]}_{p[1]}")
def sync_vector_store(request: Any, fake_embeddings: CharacterEmbeddings) -> Iterator[StrataflowStore]:
    with sync_create_vector_store(*request.param, fake_embeddings) as store:
        yield store


@pytest.fixture(name="vector_store", params=[("vector", "cosine")], ids=lambda p: f"{p[0]}_{p[1]}")
async def async_vector_store(
    request: Any, fake_embeddings: CharacterEmbeddings
) -> AsyncIterator[AsyncStrataflowStore]:
    async with async_create_vector_store(*request.param, fake_embeddings) as store:
        yield store
