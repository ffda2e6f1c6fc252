"""`strataflow api` without --workers runs one worker per usable core, each with its share of the cores for
torch's and BLAS's threads (strataflow.service.sizing), and keeps thread counts the operator set. bench.api
starts the server that way and reports the workers it ran."""

from __future__ import annotations

from strataflow.service.sizing import (
    threads_per_worker,
    worker_environment,
    workers_for,
)


def test_workers_default_to_the_cores_and_share_them_out() -> None:
    assert [workers_for(0, cores) for cores in (1, 2, 8)] == [1, 2, 8]
    assert workers_for(3, 2) == 3  # asked for: kept, even past the cores
    assert threads_per_worker(2, 2) == 1
    assert threads_per_worker(1, 4) == 4
    assert threads_per_worker(2, 8) == 4
    assert threads_per_worker(3, 2) == 1  # never 0
    assert worker_environment(2, 8, {}) == {"OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": "4"}
    assert worker_environment(2, 8, {"OMP_NUM_THREADS": "3"}) == {"MKL_NUM_THREADS": "4"}
