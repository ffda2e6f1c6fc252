"""One request's database session: authenticate the key, pick the namespace, and run the rest of the
transaction as the key's role. Shared by the HTTP dependencies and the MCP tools, so both have the same
tenancy: row-level security of the role, nothing in the routes or tools.

The rate limit runs before this, with no database work (strataflow.service.ratelimit): it gives a request its
key's bucket when the key's prefix is one of the server's active keys (read at start and every
KNOWN_KEYS_EVERY_S, and added when a key is accepted here), else the bucket of its client address.

Work that calls the model (save_info, save_user_memory) first takes one of the key's LLM slots
(STRATAFLOW_API_LLM_CONCURRENCY_PER_KEY per server process), waiting without a thread or a connection: one
key's burst of extractions queues behind itself and never holds the pool other tenants need.

Heavy requests (a search that fans out, a batch, an add of many messages: strataflow.service.app.HEAVY)
first take a turn of their key (STRATAFLOW_API_HEAVY_PER_KEY), of their namespace
(STRATAFLOW_API_HEAVY_PER_NAMESPACE) and of the process (one less than the connection pool holds), waiting
without a thread or a connection for at most STRATAFLOW_API_HEAVY_WAIT_S, then Busy (429): one tenant gets
its share of the pool and never all of it, and a light request (a context, a read) always finds a
connection.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager

import anyio
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import SQLAlchemyError

from strataflow.config import Settings
from strataflow.db import roles
from strataflow.db.engine import MAX_OVERFLOW, POOL_SIZE, deadline_ms
from strataflow.service import keys
from strataflow.service.ratelimit import KnownKeys

TOUCH_EVERY_S = 60.0
KNOWN_KEYS_EVERY_S = 30.0
SET_STATEMENT_TIMEOUT = text("select set_config('statement_timeout', :ms, true)")
SELECT_ACTIVE_PREFIXES = text(
    "select prefix from api_keys where revoked_at is null and (expires_at is null or expires_at > now())"
)


class Busy(Exception):
    """A heavy request found no turn in time (429); `wait_s` says when to retry."""

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
        self._heavy: dict[str, anyio.Semaphore] = {}
        self._heavy_all = anyio.Semaphore(max(1, POOL_SIZE + MAX_OVERFLOW - 1))

    @contextmanager
    def open(self, key: str | None, namespace: str | None) -> Iterator[tuple[Connection, keys.Caller]]:
        """A transaction as the key's role (committed when the block ends, rolled back on an error)."""
        with self.engine.begin() as conn:
            caller = self._accept(conn, key).in_namespace(namespace)
            if self._due(caller.key_id):
                keys.touch(conn, caller)
            roles.as_role(conn, caller.role)
            roles.as_agent(conn, caller.agent)
            left = deadline_ms()
            if left is not None:  # one long statement is bounded too
                conn.execute(SET_STATEMENT_TIMEOUT, {"ms": str(left)})
            yield conn, caller

    def refresh_known(self) -> None:
        """Read the prefixes of the active keys (the rate limit's key buckets); a database that cannot
        answer leaves the set as it was."""
        try:
            with self.engine.connect() as conn:
                prefixes = list(conn.execute(SELECT_ACTIVE_PREFIXES).scalars())
        except SQLAlchemyError:
            return
        self.known.replace(prefixes)

    def authenticate(self, key: str | None) -> keys.Caller:
        """The caller of a key (KeyRejected when it cannot be used), in a transaction of its own."""
        with self.engine.begin() as conn:
            return self._accept(conn, key)

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
    async def heavy_slot(self, caller: keys.Caller) -> AsyncIterator[None]:
        """Hold a turn of the caller's key, of its namespace and of the process (module docstring); Busy
        when they are not all free within STRATAFLOW_API_HEAVY_WAIT_S."""
        settings = self.settings
        with self._lock:
            turns = [
                self._heavy_turns(f"key:{caller.key_id}", settings.api_heavy_per_key),
                self._heavy_turns(f"namespace:{caller.namespace}", settings.api_heavy_per_namespace),
                self._heavy_all,
            ]
        async with AsyncExitStack() as held:
            try:
                with anyio.fail_after(settings.api_heavy_wait_s):
                    for turn in turns:
                        await turn.acquire()
                        held.callback(turn.release)
            except TimeoutError:
                raise Busy(
                    f"key {caller.key_name!r}, namespace {caller.namespace!r} or this server already runs "
                    "its share of heavy requests (searches, batches, adds: STRATAFLOW_API_HEAVY_PER_KEY, "
                    "STRATAFLOW_API_HEAVY_PER_NAMESPACE); retry shortly",
                    max(1.0, settings.api_heavy_wait_s),
                ) from None
            yield

    def _heavy_turns(self, name: str, size: int) -> anyio.Semaphore:
        turns = self._heavy.get(name)
        if turns is None:
            turns = self._heavy[name] = anyio.Semaphore(size)
        return turns

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
