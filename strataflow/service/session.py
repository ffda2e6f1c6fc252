"""One request's database session: authenticate the key, apply its rate limit, pick the namespace, and run
the rest of the transaction as the key's role. Shared by the HTTP dependencies and the MCP tools, so both
have the same tenancy: row-level security of the role, nothing in the routes or tools.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Connection, Engine

from strataflow.config import Settings
from strataflow.db import roles
from strataflow.service import keys
from strataflow.service.ratelimit import TokenBuckets

TOUCH_EVERY_S = 60.0


class RateLimited(Exception):
    """The key has used its requests for now; retry_after_s says when the next one may go."""

    def __init__(self, key_name: str, retry_after_s: float) -> None:
        super().__init__(f"rate limit of key {key_name!r} reached; retry after {retry_after_s:.2f} s")
        self.retry_after_s = retry_after_s


class Sessions:
    """Opens request transactions for one server process (its engine, its rate-limit buckets)."""

    def __init__(self, settings: Settings, engine: Engine) -> None:
        self.settings = settings
        self.engine = engine
        self.limiter = TokenBuckets(settings.api_rate_per_s, settings.api_rate_burst)
        self._touched: dict[int, float] = {}
        self._lock = threading.Lock()

    @contextmanager
    def open(
        self, key: str | None, namespace: str | None, limit: bool = True
    ) -> Iterator[tuple[Connection, keys.Caller]]:
        """A transaction as the key's role (committed when the block ends, rolled back on an error)."""
        with self.engine.begin() as conn:
            caller = keys.authenticate(conn, key)
            wait = self.limiter.take(caller.key_id) if limit else 0.0
            if wait:
                raise RateLimited(caller.key_name, wait)
            caller = caller.in_namespace(namespace)
            if self._due(caller.key_id):
                keys.touch(conn, caller)
            roles.as_role(conn, caller.role)
            yield conn, caller

    def _due(self, key_id: int) -> bool:
        now = time.monotonic()
        with self._lock:
            if now - self._touched.get(key_id, -TOUCH_EVERY_S) < TOUCH_EVERY_S:
                return False
            self._touched[key_id] = now
            return True
