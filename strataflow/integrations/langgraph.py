"""LangGraph's long-term memory store over strataflow's HTTP API: `StrataflowStore` and `AsyncStrataflowStore`
implement `langgraph.store.base.BaseStore`, so a graph (`builder.compile(store=...)`), LangMem's memory tools
and any code written against BaseStore keep their memory in strataflow with an API key, and the agent process
holds no database password.

    from strataflow.integrations.langgraph import StrataflowStore
    store = StrataflowStore(url="http://127.0.0.1:8700", api_key="sf_...")
    store.put(("memories", "u1"), "k1", {"content": "prefers tea over coffee"})
    store.search(("memories", "u1"), query="what does the user drink?")

Each batch is one request (POST /v1/store/batch, strataflow.service.routes.store, over
strataflow.adapters.store); the key's role gives the namespace (`namespace_header` picks one of several) and,
for a key bound to an agent, the agent. Namespaces map to users: the label at `subject_at` (default 1:
LangMem's ("memories", user_id)) is the subject. Labels are what BaseStore accepts (any text without "." or
NUL, a newline too; checked here as BaseStore checks them); keys are opaque ("/" in a key is not a deeper
namespace), up to 4,096 characters.

A put is embedded when written, so it is found by meaning at once: without an index its `content` text (else
its fields), with `index=["field", "meta.title", "items[*].text"]` those field paths, one vector per text, as
PostgresStore embeds them; `index=False` is not embedded (a search by meaning lists it only after the ranked
items, score None); `value=None` deletes (the item's history stays). `filter` takes value fields (dotted) with
a value or $eq, $ne, $gt, $gte, $lt, $lte, $in, $nin. `ttl` is in minutes, as BaseStore's:
`ttl_config=TTLConfig(default_ttl=..., refresh_on_read=...)` gives the default and whether reads restart it;
an expired item is gone for every read at once and swept by the next write. A batch of up to 1,000 operations
is one request and one transaction.

LangGraph's index configuration, as PostgresStore takes it: `index={"dims": ..., "embed": ..., "fields":
[...]}`: a put without `index=` embeds those field paths (default ["$"], the whole value), and a put's
`index=[...]` overrides them. The embedding itself is the server's (the one multilingual space every surface
of strataflow searches, so an item the store writes is found by the context builder, MCP and /v1/memories as
well): `embed` and `dims` are kept on `index_config` and not called. `threshold` (a store default, or per
`search(..., threshold=0.4)`) keeps only results scoring at least that (0..1). A request the server refuses
for the moment (HTTP 429 with Retry-After, or 503 with one) is sent again after the time it says, for up to
`retry_for` seconds; so is, twice, a batch that ran past the server's time limit (422 too_much_work) while
other batches of its key held the key's turn. A store sends `concurrency` requests at once (default 1, as the
server runs one batch of a key at a time): threads and coroutines sharing one store queue in it, as they
queue for PostgresStore's connection, instead of failing.

`generate_store()` is an async context manager yielding an AsyncStrataflowStore configured from
STRATAFLOW_API_URL and STRATAFLOW_API_KEY: the custom-store hook of a LangGraph deployment
(langgraph.json: {"store": {"path": "strataflow.integrations.langgraph:generate_store"}}).

Install with `pip install 'strataflow[langgraph]'`.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from concurrent.futures import Future
from contextlib import asynccontextmanager
from typing import Any, cast

import httpx
from langgraph.store.base import (
    BaseStore,
    IndexConfig,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

from strataflow.integrations.store_wire import body_of, parts, result_of, retry_after

__all__ = ["AsyncStrataflowStore", "StrataflowStore", "StrataflowStoreError", "generate_store"]
BATCH_PATH = "/v1/store/batch"


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
        index: IndexConfig | None = None,
        threshold: float | None = None,
        retry_for: float = 300.0,
        concurrency: int = 1,
    ) -> None:
        self.url = (url or os.environ.get("STRATAFLOW_API_URL") or "http://127.0.0.1:8700").rstrip("/")
        key = api_key or os.environ.get("STRATAFLOW_API_KEY")
        if not key:
            raise ValueError("an API key is needed: api_key=... or STRATAFLOW_API_KEY")
        self.subject_at, self.agent, self.timeout = subject_at, agent, timeout
        self.ttl_config = ttl_config
        self.index_config = index
        self.index_fields = None if index is None else list(index.get("fields") or ["$"])
        self.threshold, self.retry_for = threshold, retry_for
        self.headers = {"Authorization": f"Bearer {key}"}
        if namespace_header:
            self.headers["X-Namespace"] = namespace_header
        self._client: httpx.Client | None = None
        self._async_client: httpx.AsyncClient | None = None
        self._lock = threading.Lock()
        # requests this store sends at once: the server runs one batch of a key at a time
        # (STRATAFLOW_API_HEAVY_PER_KEY), so the others wait here rather than spend their time limit there
        self._sending = threading.BoundedSemaphore(concurrency)
        self._asending = asyncio.Semaphore(concurrency)
        self.requests = 0  # requests sent, and how many of them were sent again after a Retry-After
        self.retries = 0

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return self._send(list(ops))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self._asend(list(ops))

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> Future[None]:
        """PostgresStore's sweeper has nothing to do here: every read omits an expired item (in SQL) and every
        batch that writes deletes (versioned) up to 100 of them, so this is a finished future."""
        done: Future[None] = Future()
        done.set_result(None)
        return done

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        return True

    def search(
        self,
        namespace_prefix: tuple[str, ...],
        /,
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
        threshold: float | None = None,
    ) -> list[SearchItem]:
        """BaseStore.search, and `threshold`: only results scoring at least that (0..1; default: the
        store's)."""
        op = self._search_op(namespace_prefix, query, filter, limit, offset, refresh_ttl)
        return cast(list[SearchItem], self._send([op], {0: threshold})[0])

    async def asearch(
        self,
        namespace_prefix: tuple[str, ...],
        /,
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
        threshold: float | None = None,
    ) -> list[SearchItem]:
        """BaseStore.asearch, and `threshold` as in `search`."""
        op = self._search_op(namespace_prefix, query, filter, limit, offset, refresh_ttl)
        return cast(list[SearchItem], (await self._asend([op], {0: threshold}))[0])

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    async def aclose(self) -> None:
        self.close()
        if self._async_client is not None:
            await self._async_client.aclose()
            self._async_client = None

    def _check_thread(self) -> None:
        """A sync call is fine anywhere (the async store refuses one on its event loop's thread)."""

    def _count(self, retried: bool = False) -> None:
        with self._lock:
            self.requests += 1
            self.retries += retried

    def _search_op(
        self,
        prefix: tuple[str, ...],
        query: str | None,
        filter: dict[str, Any] | None,
        limit: int,
        offset: int,
        refresh_ttl: bool | None,
    ) -> SearchOp:
        if refresh_ttl is None:  # as BaseStore: the ttl_config's refresh_on_read (default on)
            refresh_ttl = bool((self.ttl_config or {}).get("refresh_on_read", True))
        return SearchOp(tuple(prefix), filter, limit, offset, query, refresh_ttl)

    def _send(self, ops: list[Op], thresholds: Mapping[int, float | None] | None = None) -> list[Result]:
        self._check_thread()
        with self._lock:
            if self._client is None:
                self._client = httpx.Client(base_url=self.url, headers=self.headers, timeout=self.timeout)
            client = self._client
        results: list[Result] = []
        for start, part in parts(ops):
            body = self._body(part, start, thresholds or {})
            deadline, tries = time.monotonic() + self.retry_for, 0
            with self._sending:
                answer = client.post(BATCH_PATH, json=body)
                while (wait := retry_after(answer, deadline, tries)) is not None:
                    self._count(retried=True)
                    time.sleep(wait)
                    tries += 1
                    answer = client.post(BATCH_PATH, json=body)
            self._count()
            results.extend(self._results(part, answer))
        return results

    async def _asend(
        self, ops: list[Op], thresholds: Mapping[int, float | None] | None = None
    ) -> list[Result]:
        if self._async_client is None:
            self._async_client = httpx.AsyncClient(
                base_url=self.url, headers=self.headers, timeout=self.timeout
            )
        client = self._async_client
        results: list[Result] = []
        for start, part in parts(ops):
            body = self._body(part, start, thresholds or {})
            deadline, tries = time.monotonic() + self.retry_for, 0
            async with self._asending:
                answer = await client.post(BATCH_PATH, json=body)
                while (wait := retry_after(answer, deadline, tries)) is not None:
                    self._count(retried=True)
                    await asyncio.sleep(wait)
                    tries += 1
                    answer = await client.post(BATCH_PATH, json=body)
            self._count()
            results.extend(self._results(part, answer))
        return results

    def _body(self, ops: list[Op], start: int, thresholds: Mapping[int, float | None]) -> dict[str, Any]:
        """The request of these ops (the batch's from `start`): each checked as BaseStore checks its
        namespace, a put without an index taking the store's index fields, a search the threshold asked (else
        the store's)."""
        sent = []
        for at, op in enumerate(ops, start):
            validate_op_namespace(op)
            if isinstance(op, PutOp) and op.index is None and self.index_fields is not None:
                op = op._replace(index=self.index_fields)
            asked = thresholds.get(at)
            sent.append(body_of(op, self.threshold if asked is None else asked))
        return {"ops": sent, "subject_at": self.subject_at, "agent": self.agent}

    def _results(self, ops: list[Op], answer: httpx.Response) -> list[Result]:
        if answer.status_code != 200:
            try:
                message = str(answer.json()["error"]["message"])
            except (ValueError, KeyError, TypeError):
                message = answer.text[:500]
            raise StrataflowStoreError(answer.status_code, message)
        return [result_of(op, found) for op, found in zip(ops, answer.json()["results"], strict=True)]


class AsyncStrataflowStore(StrataflowStore):
    """The same store for async code (abatch, aget, asearch, aput, ... over httpx.AsyncClient); close it with
    `await store.aclose()` or use `generate_store()`. As LangGraph's async stores, it gathers the operations
    its callers send while the event loop is busy into one batch (one request per MAX_OPS operations and
    MAX_SEARCHES searches), and refuses a sync call on the event loop's own thread (asyncio.InvalidStateError:
    it would block the loop); from another thread the sync methods work."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._waiting: list[tuple[asyncio.Future[list[Result]], list[Op], Mapping[int, float | None]]] = []

    def _check_thread(self) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        raise asyncio.InvalidStateError(
            f"a synchronous call to {type(self).__name__} on the event loop's thread would block the loop: "
            "use the async methods (await store.aput(...), store.aget(...), ...) there"
        )

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await self._gathered(list(ops), {})

    async def start_ttl_sweeper(  # type: ignore[override]
        self, sweep_interval_minutes: float | None = None
    ) -> asyncio.Task[None]:
        """As StrataflowStore.start_ttl_sweeper (expiry needs no sweeper): a finished task."""
        return asyncio.create_task(asyncio.sleep(0))

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:  # type: ignore[override]
        return True

    async def asearch(
        self,
        namespace_prefix: tuple[str, ...],
        /,
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
        threshold: float | None = None,
    ) -> list[SearchItem]:
        op = self._search_op(namespace_prefix, query, filter, limit, offset, refresh_ttl)
        return cast(list[SearchItem], (await self._gathered([op], {0: threshold}))[0])

    async def _gathered(self, ops: list[Op], thresholds: Mapping[int, float | None]) -> list[Result]:
        """The results of these ops, sent with those of every caller waiting in the same turn of the loop."""
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[list[Result]] = loop.create_future()
        if not self._waiting:
            loop.call_soon(lambda: loop.create_task(self._flush()))
        self._waiting.append((answer, ops, thresholds))
        return await answer

    async def _flush(self) -> None:
        waiting, self._waiting = self._waiting, []
        ops = [op for _, part, _ in waiting for op in part]
        thresholds, start = {}, 0
        for _, part, asked in waiting:
            thresholds.update({start + i: value for i, value in asked.items()})
            start += len(part)
        try:
            results = await self._asend(ops, thresholds)
        except StrataflowStoreError:
            if len(waiting) == 1:
                raise
            for answer, part, asked in waiting:  # one caller's refused operation fails only that caller
                try:
                    _settle(answer, await self._asend(part, asked))
                except Exception as exc:  # noqa: BLE001 (handed to the caller that awaits it)
                    _settle(answer, exc)
            return
        except Exception as exc:  # noqa: BLE001 (handed to every caller that awaits it)
            for answer, _, _ in waiting:
                _settle(answer, exc)
            return
        start = 0
        for answer, part, _ in waiting:
            _settle(answer, results[start : start + len(part)])
            start += len(part)


def _settle(answer: asyncio.Future[list[Result]], outcome: list[Result] | BaseException) -> None:
    """Hand a caller its results or its error (unless it stopped waiting)."""
    if answer.done():
        return
    if isinstance(outcome, BaseException):
        answer.set_exception(outcome)
    else:
        answer.set_result(outcome)


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
