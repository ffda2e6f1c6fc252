"""Keep-alive connections spread evenly over the worker processes of `strataflow api --workers N`.

SO_REUSEPORT places each new connection on a worker by a hash of its addresses (server.py). With a few
long-lived keep-alive clients, as an agent's HTTP pool is, the hash can put 6 or 7 of 8 connections on one
worker: that worker's requests then queue behind its one core (a process runs Python on one at a time)
while the other worker's core idles, and it stays so for as long as the clients keep their connections.

So each worker publishes how many connections it holds in a small file the workers share (one slot per
worker, written only by its owner, in a memory map), and a worker holding more than its share,
ceil(all connections / workers), answers the next request on one of its connections with
`Connection: close`. The client reconnects for its next request (an HTTP client does so on its own when the
server closes after a complete response) and the kernel hashes the new connection afresh; within a few
requests the counts are even. gRPC's maximum connection age does the same with a timer; counting closes
only the connections that need to move. A worker that died (uvicorn starts another) leaves a slot whose
process is gone: it counts for nothing and the next worker takes it.
"""

from __future__ import annotations

import fcntl
import math
import os
import struct
from pathlib import Path

from strataflow.service.shared_map import map_shared

SLOTS = 64  # workers one server may run
SLOT = struct.Struct("<qq")  # process id (0: free), connections it holds


class ConnectionShare:
    """This worker's slot in the shared file, and the rule for when it holds more than its share."""

    def __init__(self, path: Path) -> None:
        self._fd, self._map = map_shared(path, SLOTS * SLOT.size)
        self._pid = os.getpid()
        self._offset = self._claim() * SLOT.size

    def _claim(self) -> int:
        """A free slot (or one of a process that is gone) for this process, under the file's lock."""
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            for index in range(SLOTS):
                pid, _ = SLOT.unpack_from(self._map, index * SLOT.size)
                if pid in (0, self._pid) or not _alive(pid):
                    SLOT.pack_into(self._map, index * SLOT.size, self._pid, 0)
                    return index
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
        raise RuntimeError(f"more than {SLOTS} API worker processes share {self._map!r}")

    def publish(self, connections: int) -> None:
        """This worker now holds `connections` (those it is closing not counted)."""
        if not self._map.closed:  # a connection closing after the app's shutdown has nothing to tell
            SLOT.pack_into(self._map, self._offset, self._pid, connections)

    def over_share(self, connections: int) -> bool:
        """Whether this worker, holding `connections`, holds more than ceil(all / workers)."""
        if connections <= 1 or self._map.closed:
            return False
        slots = (SLOT.unpack_from(self._map, i * SLOT.size) for i in range(SLOTS))
        others = [held for pid, held in slots if pid not in (0, self._pid) and _alive(pid)]
        return connections > math.ceil((connections + sum(others)) / (len(others) + 1))

    def close(self) -> None:
        SLOT.pack_into(self._map, self._offset, 0, 0)
        self._map.close()
        os.close(self._fd)


def _alive(pid: int) -> bool:
    """Whether the worker `pid` still runs (a process of another user with that id now is not ours: the
    workers run as one user)."""
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True
