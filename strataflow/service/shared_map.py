"""A small file the worker processes of one `strataflow api` map into memory to share fixed-size slots in:
the rate limit's buckets (ratelimit.SharedBuckets) and the open connection counts
(balance.ConnectionShare)."""

from __future__ import annotations

import mmap
import os
from pathlib import Path


def map_shared(path: Path, size: int) -> tuple[int, mmap.mmap]:
    """The file at `path` (made with mode 0600 if missing, grown to `size` bytes) and its memory map."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    if os.fstat(fd).st_size < size:
        os.ftruncate(fd, size)
    return fd, mmap.mmap(fd, size)
