"""Per-key token buckets: each API key may make `burst` requests at once, refilled at `rate` per second.

In-process: with `strataflow api --workers N` every worker keeps its own buckets (the limit is per process).
"""

from __future__ import annotations

import threading
import time


class TokenBuckets:
    """One bucket per key; take() answers 0 when the request may go, else the seconds to wait."""

    def __init__(self, rate_per_s: float, burst: int) -> None:
        self.rate = rate_per_s
        self.burst = burst
        self._buckets: dict[object, tuple[float, float]] = {}  # key -> (tokens, last refill)
        self._lock = threading.Lock()

    def take(self, key: object) -> float:
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        with self._lock:
            tokens, last = self._buckets.get(key, (float(self.burst), now))
            tokens = min(float(self.burst), tokens + (now - last) * self.rate)
            if tokens >= 1:
                self._buckets[key] = (tokens - 1, now)
                return 0.0
            self._buckets[key] = (tokens, now)
            return (1 - tokens) / self.rate
