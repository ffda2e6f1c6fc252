"""Fair turns for the work that holds a database connection for long: who runs now, who waits, who is next.

A route declares its weight (strataflow.service.deps.Work): `scan` (one query encoded, a bounded search or
context: /v1/context, searches, user_context and their MCP tools) or `heavy` (work that grows with what the
request asks: mem0's fan-out searches, lists, adds and bulk deletes, /v1/store/batch). Each such request
takes a turn before it takes a connection, waiting without a thread or a connection, and gives it back when
its work is done.

One server process has `capacity` turns (one less than its connection pool, so a light request always finds
a connection); heavy work may hold all but one of them, so a scan always has one. Within a weight, a key
holds at most its `per_key` turns and a namespace at most its share: `per_namespace`, and no more than an
equal part of the weight's turns among the namespaces that hold or want one (max-min fairness: two
namespaces flooding with three keys leave a third namespace a free turn). A freed turn goes to the waiter
whose namespace, then key, holds the fewest turns, then to the one waiting longest: a tenant that holds
nothing is served first, whatever the others queue. Turns are not taken away from running work: each holder
is bounded by its deadline (strataflow.db.engine.work_deadline).

A weight whose limits `lend` (scans: short, bounded work) is work-conserving: a free turn that no waiter
may take within its key's and namespace's shares goes to the first-ranked waiter anyway (fewest held
first), so one key alone uses every scan turn of the process instead of leaving some idle. The shares still
decide while others want turns: a waiting key or namespace below its share takes the next free turn before
any waiter past its own, so a newcomer waits at most for the first running scan to end. Heavy work does not
lend: it runs for seconds, and a borrowed turn would keep a newcomer waiting that long.

Everything here runs on the server's event loop (one thread): no locks.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

Weight = Literal["scan", "heavy"]


@dataclass
class _Waiter:
    weight: Weight
    key: object
    namespace: str
    order: int
    granted: asyncio.Future[None] = field(repr=False)


@dataclass(frozen=True)
class Limits:
    """A weight's bounds: turns of the whole weight, of one key, of one namespace; `lend`: turns nobody may
    take within the key and namespace shares go to the first waiter anyway (module docstring)."""

    total: int
    per_key: int
    per_namespace: int
    lend: bool = False


class Turns:
    """The turns of one server process (module docstring)."""

    def __init__(self, capacity: int, limits: dict[Weight, Limits]) -> None:
        self.capacity = max(1, capacity)
        self.limits = limits
        self._held: Counter[tuple[object, ...]] = Counter()
        self._waiting: list[_Waiter] = []
        self._order = itertools.count()

    def held(self, weight: Weight | None = None, namespace: str | None = None) -> int:
        """Turns held now: in all, of a weight, of a weight and namespace."""
        if weight is None:
            return self._held[()]
        if namespace is None:
            return self._held[(weight,)]
        return self._held[(weight, "ns", namespace)]

    async def take(self, weight: Weight, key: object, namespace: str, wait_s: float) -> None:
        """Take one turn of `weight` (give it back with give_back); TimeoutError when none came within
        wait_s."""
        loop = asyncio.get_running_loop()
        waiter = _Waiter(weight, key, namespace, next(self._order), loop.create_future())
        self._waiting.append(waiter)
        self._dispatch()
        if waiter.granted.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(waiter.granted), timeout=max(0.0, wait_s))
        except (TimeoutError, asyncio.CancelledError):
            if waiter.granted.done() and not waiter.granted.cancelled():
                self.give_back(weight, key, namespace)  # granted as the wait ended: not used
            else:
                waiter.granted.cancel()
                self._waiting.remove(waiter)
                self._dispatch()  # the shares of the others may have grown
            raise

    def give_back(self, weight: Weight, key: object, namespace: str) -> None:
        for name in self._names(weight, key, namespace):
            self._held[name] -= 1
        self._dispatch()

    @staticmethod
    def _names(weight: Weight, key: object, namespace: str) -> tuple[tuple[object, ...], ...]:
        return (), (weight,), (weight, "key", key), (weight, "ns", namespace)

    def _share(self, weight: Weight, namespace: str) -> int:
        """The turns of `weight` one namespace may hold now: its setting, and no more than an equal part
        among the namespaces holding or waiting for one."""
        limits = self.limits[weight]
        active = {w.namespace for w in self._waiting if w.weight == weight}
        holding = (name for name, count in self._held.items() if count > 0 and name[:2] == (weight, "ns"))
        active |= {str(name[2]) for name in holding}
        active.add(namespace)
        return min(limits.per_namespace, max(1, self._total(weight) // len(active)))

    def _total(self, weight: Weight) -> int:
        return min(self.limits[weight].total, self.capacity)

    def _free(self, weight: Weight) -> bool:
        """Whether a turn of `weight` is free: in the process and within the weight's total."""
        return self._held[()] < self.capacity and self._held[(weight,)] < self._total(weight)

    def _allowed(self, waiter: _Waiter) -> bool:
        """Whether the waiter may take a free turn within its key's and namespace's shares."""
        weight, limits = waiter.weight, self.limits[waiter.weight]
        return (
            self._free(weight)
            and self._held[(weight, "key", waiter.key)] < limits.per_key
            and self._held[(weight, "ns", waiter.namespace)] < self._share(weight, waiter.namespace)
        )

    def _dispatch(self) -> None:
        """Grant turns to the waiters that may take one, fewest held first; then, of a weight that lends,
        the free turns nobody may take within the shares, fewest held first too (module docstring)."""
        while True:
            ranked = sorted(
                self._waiting,
                key=lambda w: (
                    self._held[(w.weight, "ns", w.namespace)], self._held[(w.weight, "key", w.key)], w.order
                ),
            )  # fmt: skip
            chosen = next((w for w in ranked if self._allowed(w)), None)
            if chosen is None:
                lent = (w for w in ranked if self.limits[w.weight].lend and self._free(w.weight))
                chosen = next(lent, None)
            if chosen is None:
                return
            self._waiting.remove(chosen)
            for name in self._names(chosen.weight, chosen.key, chosen.namespace):
                self._held[name] += 1
            chosen.granted.set_result(None)
