"""LangGraph's long-term memory store over strataflow's HTTP API: `StrataflowStore` and `AsyncStrataflowStore`
implement `langgraph.store.base.BaseStore`, so a graph (`builder.compile(store=...)`), LangMem's memory tools
and any code written against BaseStore keep their memory in strataflow with an API key, and the agent process
holds no database password.

    from strataflow.integrations.langgraph import StrataflowStore
    store = StrataflowStore(url="http://127.0.0.1:8700", api_key="sf_...")
    store.put(("memories", "u1"), "k1", {"content": "prefers tea over coffee"})
    store.search(("memories", "u1"), query="what does the user drink?")

Each batch is one request (POST /v1/store/batch, strataflow.service.routes.store); the key's role gives the
namespace (`namespace_header` picks one of several) and, for a key bound to an agent, the agent.
Namespaces map to users: the label at `subject_at` (default 1: LangMem's ("memories", user_id)) is the
subject. A put is embedded when written, so it is found by meaning at once; `index=False` is not embedded
(a search by meaning lists it only after the ranked items, score None), `index=["field", ...]` embeds those
fields; `value=None` deletes (the item's history stays); `filter` takes value fields with a value or $eq,
$ne, $gt, $gte, $lt, $lte, $in, $nin. Keys are opaque ("/" in a key is not a deeper namespace), up to 4,096
characters; labels up to 200, without "/" or control characters (the user's label is a subject id).
`ttl` is in minutes, as BaseStore's: `ttl_config=TTLConfig(default_ttl=...,
refresh_on_read=...)` gives the default and whether reads restart it; an expired item is gone for every read
at once and swept by the next write. A batch of up to 1,000 operations is one request and one transaction.

`generate_store()` is an async context manager yielding an AsyncStrataflowStore configured from
STRATAFLOW_API_URL and STRATAFLOW_API_KEY: the custom-store hook of a LangGraph deployment
(langgraph.json: {"store": {"path": "strataflow.integrations.langgraph:generate_store"}}).

Install with `pip install 'strataflow[langgraph]'`.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import httpx
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

__all__ = ["AsyncStrataflowStore", "StrataflowStore", "StrataflowStoreError", "generate_store"]
BATCH_PATH = "/v1/store/batch"
MAX_OPS = 1000  # operations per request (the server's limit: a longer batch is several requests)


class StrataflowStoreError(RuntimeError):
    """The server refused a batch; the message is its error message, `status` the HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"strataflow store: HTTP {status}: {message}")
        self.status = status


class StrataflowStore(BaseStore):
    """A BaseStore whose items are strataflow memory entries, reached over the HTTP API with an API key."""

    supports_ttl = True

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        subject_at: int = 1,
        agent: str | None = None,
        namespace_header: str | None = None,
        timeout: float = 120.0,
        ttl_config: TTLConfig | None = None,
    ) -> None:
        self.url = (url or os.environ.get("STRATAFLOW_API_URL") or "http://127.0.0.1:8700").rstrip("/")
        key = api_key or os.environ.get("STRATAFLOW_API_KEY")
        if not key:
            raise ValueError("an API key is needed: api_key=... or STRATAFLOW_API_KEY")
        self.subject_at, self.agent, self.timeout = subject_at, agent, timeout
        self.ttl_config = ttl_config
        self.headers = {"Authorization": f"Bearer {key}"}
        if namespace_header:
            self.headers["X-Namespace"] = namespace_header
        self._client: httpx.Client | None = None
        self._async_client: httpx.AsyncClient | None = None

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        if self._client is None:
            self._client = httpx.Client(base_url=self.url, headers=self.headers, timeout=self.timeout)
        results: list[Result] = []
        for start in range(0, len(ops), MAX_OPS):
            part = ops[start : start + MAX_OPS]
            answer = self._client.post(BATCH_PATH, json=self._body(part))
            results.extend(self._results(part, answer))
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        if self._async_client is None:
            self._async_client = httpx.AsyncClient(
                base_url=self.url, headers=self.headers, timeout=self.timeout
            )
        results: list[Result] = []
        for start in range(0, len(ops), MAX_OPS):
            part = ops[start : start + MAX_OPS]
            answer = await self._async_client.post(BATCH_PATH, json=self._body(part))
            results.extend(self._results(part, answer))
        return results

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    async def aclose(self) -> None:
        self.close()
        if self._async_client is not None:
            await self._async_client.aclose()
            self._async_client = None

    def _body(self, ops: list[Op]) -> dict[str, Any]:
        return {"ops": [_op(op) for op in ops], "subject_at": self.subject_at, "agent": self.agent}

    def _results(self, ops: list[Op], answer: httpx.Response) -> list[Result]:
        if answer.status_code != 200:
            try:
                message = str(answer.json()["error"]["message"])
            except (ValueError, KeyError, TypeError):
                message = answer.text[:500]
            raise StrataflowStoreError(answer.status_code, message)
        return [_result(op, found) for op, found in zip(ops, answer.json()["results"], strict=True)]


class AsyncStrataflowStore(StrataflowStore):
    """The same store for async code (abatch, aget, asearch, aput, ... over httpx.AsyncClient); close it
    with `await store.aclose()` or use `generate_store()`. The sync methods work too."""


@asynccontextmanager
async def generate_store(
    url: str | None = None, api_key: str | None = None, **options: Any
) -> AsyncIterator[AsyncStrataflowStore]:
    """An AsyncStrataflowStore (STRATAFLOW_API_URL and STRATAFLOW_API_KEY unless given), closed on exit."""
    store = AsyncStrataflowStore(url, api_key, **options)
    try:
        yield store
    finally:
        await store.aclose()


def _op(op: Op) -> dict[str, Any]:
    if isinstance(op, GetOp):
        return {"op": "get", "namespace": list(op.namespace), "key": op.key, "refresh_ttl": op.refresh_ttl}
    if isinstance(op, PutOp):
        index = op.index if op.index is False or op.index is None else list(op.index)
        return {
            "op": "put", "namespace": list(op.namespace), "key": op.key, "value": op.value, "index": index,
            "ttl": op.ttl,
        }  # fmt: skip
    if isinstance(op, SearchOp):
        return {
            "op": "search", "namespace": list(op.namespace_prefix), "query": op.query, "filter": op.filter,
            "limit": op.limit, "offset": op.offset, "refresh_ttl": op.refresh_ttl,
        }  # fmt: skip
    if isinstance(op, ListNamespacesOp):
        conditions = [{"match_type": c.match_type, "path": list(c.path)} for c in op.match_conditions or ()]
        return {
            "op": "list_namespaces", "match_conditions": conditions, "max_depth": op.max_depth,
            "limit": op.limit, "offset": op.offset,
        }  # fmt: skip
    raise TypeError(f"unknown store operation {type(op).__name__}")


def _item(found: dict[str, Any]) -> Item:
    return Item(
        value=found["value"], key=found["key"], namespace=tuple(found["namespace"]),
        created_at=_time(found["created_at"]), updated_at=_time(found["updated_at"]),
    )  # fmt: skip


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _result(op: Op, found: Any) -> Result:
    if isinstance(op, GetOp):
        return None if found is None else _item(found)
    if isinstance(op, SearchOp):
        return [
            SearchItem(
                namespace=tuple(hit["namespace"]),
                key=hit["key"],
                value=hit["value"],
                created_at=_time(hit["created_at"]),
                updated_at=_time(hit["updated_at"]),
                score=hit.get("score"),
            )  # fmt: skip
            for hit in found
        ]
    if isinstance(op, ListNamespacesOp):
        return [tuple(namespace) for namespace in found]
    return None
