"""How many processes `strataflow api` runs and how many compute threads each one gets.

A request's Python (routing, ranking, the context budget) holds its process's GIL, so one process keeps at
most about one core busy however many clients it serves: the default is one worker per core this process
may run on (its CPU affinity, which a container's cpuset narrows, not the host's count). Each worker then
gets `cores // workers` (at least 1) intra-op threads for torch and the BLAS libraries (OMP_NUM_THREADS,
MKL_NUM_THREADS): left alone, each worker would start one thread per core, 2 workers x 2 threads on 2 cores,
and a document encode in one worker would take the core the other's requests need. A value the operator
set in the environment is kept. The query encode of a search runs on one thread whatever this says
(strataflow.retrieval.search.embed_query).

Each worker's connection pool (strataflow.db.engine: 4, kept once opened) holds more than the requests one
core runs at once, so the pool does not bound the workers' throughput; requests past it wait for a
connection.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the platform tells it, else the CPU count)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def workers_for(requested: int, cores: int) -> int:
    """The worker count: `requested` when above 0, else one per core."""
    return requested if requested > 0 else max(1, cores)


def threads_per_worker(workers: int, cores: int) -> int:
    """Compute threads per worker so that the workers together use the cores once, at least one each."""
    return max(1, cores // max(1, workers))


def worker_environment(workers: int, cores: int, environ: Mapping[str, str]) -> dict[str, str]:
    """The thread variables to set for the workers: those the environment does not set already."""
    threads = str(threads_per_worker(workers, cores))
    return {name: threads for name in THREAD_VARIABLES if not environ.get(name)}
