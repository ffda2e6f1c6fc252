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


def tree_cpu_s(root: int) -> float:
    """CPU seconds (user + system) of a process and its descendants so far, from /proc: the root's own time
    and that of the children it has reaped (cutime, cstime), plus each live descendant's own time."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            _, fields = _fields(entry.name)
        except (OSError, ValueError):  # the process ended meanwhile
            continue
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        reaped = int(fields[13]) + int(fields[14]) if pid == root else 0
        ticks[pid] = int(fields[11]) + int(fields[12]) + reaped
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += ticks.get(pid, 0)
        todo += [child for child, parent in parents.items() if parent == pid]
    return total / TICKS_PER_S


def sample(postmaster: int | None) -> CpuSample:
    return CpuSample(time.process_time(), None if postmaster is None else tree_cpu_s(postmaster))


def used(before: CpuSample, after: CpuSample) -> CpuSample:
    """CPU seconds between two samples."""
    server = None
    if before.server_s is not None and after.server_s is not None:
        server = after.server_s - before.server_s
    return CpuSample(after.client_s - before.client_s, server)


# The probe's fixed work: pure Python, no I/O, no allocation to speak of (about 0.1-0.3 s on the team's VM).
PROBE_LOOPS = 2_000_000


def _probe_work(start_at: float) -> tuple[int, float, float]:
    """Wait until start_at (time.monotonic, shared by the processes of one machine), run the fixed loop;
    (pid, start, end) of the loop."""
    while time.monotonic() < start_at:
        time.sleep(0.001)
    started = time.monotonic()
    total = 0
    for number in range(PROBE_LOOPS):
        total += number
    return os.getpid(), started, time.monotonic()


def parallel_capacity(repeats: int = 3) -> float:
    """How many cores' worth of work two processes get done at once: 2 x (one process alone) / (two together),
    over the same fixed loop, the best of `repeats` tries each. 2.0 on two free cores; a shared VM that time-
    slices its vCPUs on a busy host gives less (1.4 was measured), and every two-core `ratio` with it."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(_probe_work, [0.0, 0.0]))  # both workers started and warm
        alone, together = [], []
        while len(together) < repeats:
            _, start, end = pool.submit(_probe_work, 0.0).result()
            alone.append(end - start)
            start_at = time.monotonic() + 0.05
            runs = list(pool.map(_probe_work, [start_at, start_at]))
            if runs[0][0] != runs[1][0]:  # one run per process (a worker may, rarely, take both)
                together.append(max(end for _, _, end in runs) - start_at)
    return round(2 * min(alone) / min(together), 2)
