"""The request rate limit, applied before any database work, for the server as a whole.

Token buckets: each bucket may take `burst` requests at once, refilled at `rate` per second. A request whose
bearer key is one of the server's active keys (by its visible prefix: the set strataflow.service.session
keeps) takes from its key's bucket; every other request (no key, a malformed or made-up key) takes from the
bucket of its client address, so guessing keys or sending none is limited too, and a flood of made-up keys
cannot make a bucket each. The client address is the connecting one; X-Forwarded-For replaces it only when
the connection comes from a proxy listed in STRATAFLOW_API_TRUSTED_PROXIES. The check happens in an ASGI
middleware, before routing, authentication or any SQL: a limited request costs no database work at all.

With `strataflow api --workers N` the buckets live in one small file shared by the N processes (a fixed table
of slots in a memory map, updated under an exclusive lock on the file), so the configured rate holds for the
server as a whole, whatever N. Without a file (an app made in a test) they live in the process.
"""

from __future__ import annotations

import fcntl
import hashlib
import math
import os
import re
import struct
import threading
import time
from collections import OrderedDict
from pathlib import Path

from starlette.types import ASGIApp, Receive, Scope, Send

from strataflow.service.shared_map import map_shared

SLOTS = 8192
SLOT = struct.Struct("<16sdd")  # key digest, tokens, last refill (time.monotonic: one clock per machine)
EMPTY = bytes(16)
PROBES = 32
# Bearer KEY, or Token KEY as mem0's client sends it to /mem0
KEY_PREFIX = re.compile(rb"^\s*(?:[Bb][Ee][Aa][Rr][Ee][Rr]|[Tt][Oo][Kk][Ee][Nn])\s+(sf_[0-9a-f]{8})_")
LIMITED_PATHS = ("/v1/", "/mcp", "/mem0/")
KNOWN_KEYS = 10_000  # accepted key prefixes remembered per process


class Buckets:
    """Token buckets in this process (take() answers 0 when the request may go, else seconds to wait)."""

    def __init__(self, rate_per_s: float, burst: int) -> None:
        self.rate, self.burst = rate_per_s, burst
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> float:
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(key, (float(self.burst), now))
            tokens, wait = _refill(tokens, last, now, self.rate, self.burst)
            self._buckets[key] = (tokens, now)
            return wait


class SharedBuckets(Buckets):
    """The same buckets in a file every worker process of one server maps (see the module docstring)."""

    def __init__(self, path: Path, rate_per_s: float, burst: int) -> None:
        super().__init__(rate_per_s, burst)
        self._fd, self._map = map_shared(path, SLOTS * SLOT.size)
        self._stale_after = (burst / rate_per_s if rate_per_s > 0 else 0.0) + 60.0

    def take(self, key: str) -> float:
        if self.rate <= 0:
            return 0.0
        digest = hashlib.sha256(key.encode()).digest()[:16]
        home = int.from_bytes(digest[:4], "little") % SLOTS
        with self._lock:  # threads of this process; the file lock orders the processes
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                now = time.monotonic()
                slot, tokens, last = self._find(digest, home, now)
                tokens, wait = _refill(tokens, last, now, self.rate, self.burst)
                SLOT.pack_into(self._map, slot * SLOT.size, digest, tokens, now)
                return wait
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _find(self, digest: bytes, home: int, now: float) -> tuple[int, float, float]:
        """The key's slot (tokens, last refill), or a free or stale one near its home slot (a full bucket)."""
        free = None
        for step in range(PROBES):
            slot = (home + step) % SLOTS
            held, tokens, last = SLOT.unpack_from(self._map, slot * SLOT.size)
            if held == digest:
                return slot, tokens, last
            if free is None and (held == EMPTY or now - last > self._stale_after):
                free = slot
        return (home if free is None else free), float(self.burst), now

    def close(self) -> None:
        self._map.close()
        os.close(self._fd)


def _refill(tokens: float, last: float, now: float, rate: float, burst: int) -> tuple[float, float]:
    """(tokens left, seconds to wait): one token taken when there is one, else the wait for the next."""
    tokens = min(float(burst), tokens + max(0.0, now - last) * rate)
    if tokens >= 1:
        return tokens - 1, 0.0
    return tokens, (1 - tokens) / rate


class KnownKeys:
    """Prefixes of the active keys (bounded, most recent kept): only those get a key's bucket."""

    def __init__(self, size: int = KNOWN_KEYS) -> None:
        self.size = size
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, prefix: str) -> None:
        with self._lock:
            self._seen[prefix] = None
            self._seen.move_to_end(prefix)
            while len(self._seen) > self.size:
                self._seen.popitem(last=False)

    def replace(self, prefixes: list[str]) -> None:
        with self._lock:
            self._seen = OrderedDict.fromkeys(prefixes[-self.size :])

    def __contains__(self, prefix: object) -> bool:
        with self._lock:
            return prefix in self._seen


class RateLimit:
    """ASGI middleware: 429 with Retry-After for a request over its bucket, before anything else runs."""

    def __init__(self, app: ASGIApp, buckets: Buckets, known: KnownKeys) -> None:
        self.app, self.buckets, self.known = app, buckets, known

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(LIMITED_PATHS):
            await self.app(scope, receive, send)
            return
        bucket = self.bucket(scope)
        wait = self.buckets.take(bucket)
        if wait:
            from strataflow.service.errors import error_response

            who = "this API key" if bucket.startswith("key:") else "requests without an accepted key"
            response = error_response(
                429,
                f"rate limit of {who} reached (STRATAFLOW_API_RATE_PER_S); retry after {wait:.2f} s",
                **{"Retry-After": str(max(1, math.ceil(wait)))},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def bucket(self, scope: Scope) -> str:
        for name, value in scope.get("headers") or []:
            if name == b"authorization":
                found = KEY_PREFIX.match(value)
                if found is not None and found.group(1).decode() in self.known:
                    return f"key:{found.group(1).decode()}"
                break
        client = scope.get("client")
        return f"addr:{client[0] if client else 'unknown'}"
