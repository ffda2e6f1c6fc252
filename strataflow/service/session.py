"""One request's database session: authenticate the key, pick the namespace, and run the rest of the
transaction as the key's role. Shared by the HTTP dependencies and the MCP tools, so both have the same
tenancy: row-level security of the role, nothing in the routes or tools.

The rate limit runs before this, with no database work (strataflow.service.ratelimit): it gives a request its
key's bucket when the key's prefix is one of the server's active keys (read at start and every
KNOWN_KEYS_EVERY_S, and added when a key is accepted here), else the bucket of its client address.

Work that calls the model (save_info, save_user_memory) first takes one of the key's LLM slots
(STRATAFLOW_API_LLM_CONCURRENCY_PER_KEY per server process), waiting without a thread or a connection: one
key's burst of extractions queues behind itself and never holds the pool other tenants need.

Work that encodes a query or scans (a scan) or grows with what it asks (heavy) first takes a turn
(strataflow.service.turns: fair across namespaces and keys, one less than the pool, none held while
waiting), waiting at most STRATAFLOW_API_HEAVY_WAIT_S, then Busy (429); its work is bounded from the
request's arrival (STRATAFLOW_API_SCAN_MAX_S, STRATAFLOW_API_HEAVY_MAX_S: work_deadline), its wait included.
A light request (a read by id, a write of one entry) takes no turn and always finds a connection.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager

import anyio
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import SQLAlchemyError

from strataflow.config import Settings
from strataflow.db import roles
from strataflow.db.engine import MAX_OVERFLOW, POOL_SIZE, deadline_ms, work_deadline
from strataflow.service import keys
from strataflow.service.ratelimit import KnownKeys
from strataflow.service.turns import Limits, Turns, Weight

TOUCH_EVERY_S = 60.0
KNOWN_KEYS_EVERY_S = 30.0
SET_STATEMENT_TIMEOUT = text("select set_config('statement_timeout', :ms, true)")
SELECT_ACTIVE_PREFIXES = text(
    "select prefix from api_keys where revoked_at is null and (expires_at is null or expires_at > now())"
)


class Busy(Exception):
    """A scan or heavy request found no turn in time (429); `wait_s` says when to retry."""

    def __init__(self, message: str, wait_s: float) -> None:
        super().__init__(message)
        self.wait_s = wait_s


class Sessions:
    """Opens request transactions for one server process (its engine, the keys it has accepted, the LLM
    slots of each key)."""

    def __init__(self, settings: Settings, engine: Engine) -> None:
        self.settings = settings
        self.engine = engine
        self.known = KnownKeys()
        self._touched: dict[int, float] = {}
        self._lock = threading.Lock()
        self._slots: dict[str, anyio.Semaphore] = {}
        self._warm = threading.Lock()
        self._warmed = False
        turns = max(1, POOL_SIZE + MAX_OVERFLOW - 1)  # one connection stays for light requests
        self.turns = Turns(turns, {
            "scan": Limits(turns, settings.api_scan_per_key, turns, lend=True),
            "heavy": Limits(max(1, turns - 1), settings.api_heavy_per_key, settings.api_heavy_per_namespace),
        })  # fmt: skip

    @contextmanager
    def open(
        self, key: str | None, namespace: str | None, known: keys.Caller | None = None
    ) -> Iterator[tuple[Connection, keys.Caller]]:
        """A transaction as the key's role (committed when the block ends, rolled back on an error). The key
        is checked inside it, unless the request's caller is `known` already (identify)."""
        with self.engine.begin() as conn:
            caller = known or self._accept(conn, key).in_namespace(namespace)
            if self._due(caller.key_id):
                keys.touch(conn, caller)
            roles.as_role(conn, caller.role)
            roles.as_agent(conn, caller.agent)
            left = deadline_ms()
            if left is not None:  # one long statement is bounded too
                conn.execute(SET_STATEMENT_TIMEOUT, {"ms": str(left)})
            yield conn, caller

    def warm_up(self) -> None:
        """Load what the first request would otherwise wait for, once per process (later calls return at
        once, or wait for the first): every configured embedding model (with two, the second model across
        languages: strataflow.retrieval.cross_check), the default one's question centroid
        (strataflow.retrieval.question_centroid: 96 short texts encoded once), jieba's dictionary and the
        token counter. A scan's time limit never pays for it."""
        with self._warm:
            if self._warmed:
                return
            from strataflow.llm.embeddings import embedding_models, get_embedder
            from strataflow.memory.item_embedding import multi_model
            from strataflow.retrieval import cross_check
            from strataflow.retrieval.context_budget import count_tokens
            from strataflow.retrieval.question_centroid import question_centroid
            from strataflow.textsearch import chinese_tokens

            for model in embedding_models(self.settings):
                get_embedder(self.settings, model).encode_queries(["warm up"])
            if multi_model(self.settings):  # questions meet rows of the other language (search's rule)
                cross_check.warm_up()
            chinese_tokens("预热分词")  # jieba's dictionary, which the first Chinese text would load
            question_centroid(self.settings, self.settings.embedding_model)
            count_tokens("warm up")
            self._warmed = True

    def identify(self, key: str | None, namespace: str | None) -> keys.Caller:
        """The caller of a key in the namespace it picks (KeyRejected, NamespaceRequired, AccessError), in a
        short transaction of its own: for work that must know its caller before it takes a connection."""
        with self.engine.begin() as conn:
            return self._accept(conn, key).in_namespace(namespace)

    def authenticate(self, key: str | None) -> keys.Caller:
        """The caller of a key before it picks a namespace (KeyRejected when it cannot be used), in a
        transaction of its own (/mcp's key check)."""
        with self.engine.begin() as conn:
            return self._accept(conn, key)

    def refresh_known(self) -> None:
        """Read the prefixes of the active keys (the rate limit's key buckets); a database that cannot
        answer leaves the set as it was."""
        try:
            with self.engine.connect() as conn:
                prefixes = list(conn.execute(SELECT_ACTIVE_PREFIXES).scalars())
        except SQLAlchemyError:
            return
        self.known.replace(prefixes)

    @asynccontextmanager
    async def llm_slot(self, key: str | None) -> AsyncIterator[None]:
        """Hold one of the key's LLM slots (waiting asynchronously for one)."""
        name = (key or "").strip()[
            :11
        ]  # the visible prefix (sf_ + 8 hex): a made-up key is refused right after
        with self._lock:
            slot = self._slots.get(name)
            if slot is None:
                slot = self._slots[name] = anyio.Semaphore(self.settings.api_llm_concurrency_per_key)
        async with slot:
            yield

    @asynccontextmanager
    async def turn(self, caller: keys.Caller, weight: Weight, arrived: float) -> AsyncIterator[None]:
        """Hold a turn of `weight` (strataflow.service.turns) and bound the work inside to its time limit
        from `arrived` (time.monotonic() at the request's arrival): Busy when no turn came in time."""
        settings = self.settings
        limit, name = (
            (settings.api_scan_max_s, "STRATAFLOW_API_SCAN_MAX_S") if weight == "scan"
            else (settings.api_heavy_max_s, "STRATAFLOW_API_HEAVY_MAX_S")
        )  # fmt: skip
        wait_s = min(settings.api_heavy_wait_s, arrived + limit - time.monotonic())
        try:
            await self.turns.take(weight, caller.key_id, caller.namespace, wait_s)
        except TimeoutError:
            setting = "STRATAFLOW_API_SCAN_PER_KEY" if weight == "scan" else "STRATAFLOW_API_HEAVY_PER_KEY"
            raise Busy(
                f"key {caller.key_name!r}, namespace {caller.namespace!r} or this server already runs its "
                f"share of {'searches and contexts' if weight == 'scan' else 'heavy requests'} ({setting}, "
                "STRATAFLOW_API_HEAVY_PER_NAMESPACE); retry shortly",
                max(1.0, settings.api_heavy_wait_s),
            ) from None
        try:
            with work_deadline(arrived + limit - time.monotonic(), f"{name}, {limit:g} s"):
                yield
        finally:
            self.turns.give_back(weight, caller.key_id, caller.namespace)

    def _accept(self, conn: Connection, key: str | None) -> keys.Caller:
        caller = keys.authenticate(conn, key)
        if key:
            self.known.add(key.strip()[:11])
        return caller

    def _due(self, key_id: int) -> bool:
        now = time.monotonic()
        with self._lock:
            if now - self._touched.get(key_id, -TOUCH_EVERY_S) < TOUCH_EVERY_S:
                return False
            self._touched[key_id] = now
            return True
