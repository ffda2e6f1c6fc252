"""CPU seconds spent by this process and by the local PostgreSQL server during a timed phase.

A shared VM can give a run less than its cores, and then a two-core pipeline loses to a one-thread
baseline by more than its code does. The CPU a phase used (and how many cores that was over its wall time)
tells the two apart: the ratio of CPU seconds does not depend on how many cores the machine gave.

The server's CPU comes from /proc: the postmaster's own time, the time of the backends it has reaped
(cutime, cstime: the writer connections close before a phase ends) and the time of each live child
(backends, WAL writer, checkpointer, autovacuum). None where the server is not a local process this user
can read (a remote database, another container).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, text

TICKS_PER_S = os.sysconf("SC_CLK_TCK")
LOCAL_HOSTS = {None, "", "localhost", "127.0.0.1", "::1"}
SELECT_CHECKPOINTER = text("select pid from pg_stat_activity where backend_type = 'checkpointer'")
PROC = Path("/proc")


@dataclass(frozen=True)
class CpuSample:
    client_s: float  # this process, all threads
    server_s: float | None  # the PostgreSQL server, all processes


def _fields(pid: int | str) -> tuple[str, list[str]]:
    """(comm, the fields after it) of /proc/<pid>/stat; after comm, [1] is ppid and [11:15] are utime,
    stime, cutime and cstime in clock ticks."""
    data = (PROC / str(pid) / "stat").read_text()
    return data[data.index("(") + 1 : data.rindex(")")], data[data.rindex(")") + 2 :].split()


def postmaster_pid(engine: Engine) -> int | None:
    """The pid of the server's postmaster when it runs on this machine and /proc shows it, else None."""
    host = engine.url.host
    if host not in LOCAL_HOSTS and not str(host).startswith("/"):
        return None
    with engine.connect() as conn:
        checkpointer = conn.execute(SELECT_CHECKPOINTER).scalar()
    try:
        comm, fields = _fields(checkpointer)
        parent = int(fields[1])
        parent_comm, _ = _fields(parent)
    except (OSError, TypeError, ValueError, IndexError):
        return None
    return parent if comm == parent_comm == "postgres" else None


def server_cpu_s(postmaster: int) -> float:
    """CPU seconds of the server so far (module docstring)."""
    _, own = _fields(postmaster)
    ticks = sum(int(value) for value in own[11:15])
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            _, fields = _fields(entry.name)
        except (OSError, ValueError):  # the process ended meanwhile
            continue
        if int(fields[1]) == postmaster:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / TICKS_PER_S


def sample(postmaster: int | None) -> CpuSample:
    return CpuSample(time.process_time(), None if postmaster is None else server_cpu_s(postmaster))


def used(before: CpuSample, after: CpuSample) -> CpuSample:
    """CPU seconds between two samples."""
    server = None
    if before.server_s is not None and after.server_s is not None:
        server = after.server_s - before.server_s
    return CpuSample(after.client_s - before.client_s, server)
