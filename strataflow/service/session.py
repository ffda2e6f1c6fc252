"""One request's database session: authenticate the key, pick the namespace, and run the rest of the
transaction as the key's role. Shared by the HTTP dependencies and the MCP tools, so both have the same
tenancy: row-level security of the role, nothing in the routes or tools.

The rate limit runs before this, with no database work (strataflow.service.ratelimit): it gives a request its
key's bucket when the key's prefix is one of the server's active keys (read at start and every
KNOWN_KEYS_EVERY_S, and added when a key is accepted here), else the bucket of its client address.

Work that calls the model (save_info, save_user_memory) first takes one of the key's LLM slots
(STRATAFLOW_API_LLM_CONCURRENCY_PER_KEY per server process), waiting without a thread or a connection: one
key's burst of extractions queues behind itself and never holds the pool other tenants need.
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
from strataflow.service import keys
from strataflow.service.ratelimit import KnownKeys

TOUCH_EVERY_S = 60.0
KNOWN_KEYS_EVERY_S = 30.0
SELECT_ACTIVE_PREFIXES = text(
    "select prefix from api_keys where revoked_at is null and (expires_at is null or expires_at > now())"
)


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

    @contextmanager
    def open(self, key: str | None, namespace: str | None) -> Iterator[tuple[Connection, keys.Caller]]:
        """A transaction as the key's role (committed when the block ends, rolled back on an error)."""
        with self.engine.begin() as conn:
            caller = self._accept(conn, key).in_namespace(namespace)
            if self._due(caller.key_id):
                keys.touch(conn, caller)
            roles.as_role(conn, caller.role)
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
