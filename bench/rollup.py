"""Weekly rollup throughput on one and on two Dask workers: `python -m bench.rollup [--scopes N]`.

Loads N scopes (default 10,000) into namespace bench_rollup, each with a week of chat in the last complete
ISO week (MESSAGES_PER_SCOPE messages, user and assistant turns, English and some Chinese), through the real
ingest (strataflow.pipeline.ingest.ingest_logs: one JSONL file, staging COPY). Then, with the offline model
(offline/rules), the weekly rollup of those scope-weeks, timed twice: on a dask.distributed LocalCluster of
one worker process, then of two (threads_per_worker=1, processes=True, as flow_runner.task_runner asks).

What runs on the workers is the code path of the weekly flow: its rollup-weeks task
(tasks/rollup.py rollup_weeks_task) is a thin wrapper over `rollup_weeks(settings, run_id=...,
namespace=..., shard=...)`, and the flow's fan_out submits one such task per shard (Shard(i, n), one per Dask
worker). The bench submits that same plain function, one shard per worker, to the cluster directly instead of
through Prefect's DaskTaskRunner: Prefect adds about 0.4 s per task and 4.5 s of cluster start (PREFECT.md)
and needs an API server that every worker talks to, none of which is rollup throughput. Each cluster is
started and its workers warmed up (litellm imported, the offline provider registered, a rollup of a small
warm-up namespace) before the clock starts; before each timing the bench's reports and LLM cache rows are
deleted (so both do the same work: every scope-week rolled up with a model call) and the tables vacuumed.

Figures: `scopes_per_s_1` and `scopes_per_s_2` (scope-weeks rolled up per second), `ratio` =
scopes_per_s_2 / scopes_per_s_1 (target >= 1.6 on 2 cores), `hours_for_10k` = 10,000 / scopes_per_s_1 /
3600 (target < 1), `peak_rss_mb` (the largest peak RSS of the bench process and its workers), and
`parallel_capacity` before and after the timings (bench/cpu.py: how many cores' worth of a fixed loop two
processes get through at once; 2.0 on two free cores): `ratio` cannot exceed it, so a low `ratio` beside a
low capacity is the machine, not the code. Prints one JSON line last; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import Engine, text

from bench import cpu
from bench.ingest import CHINESE, ENGLISH, PEOPLE, THINGS
from models.params import Shard
from strataflow.config import Settings, load_settings
from strataflow.db import migrations
from strataflow.db.engine import dispose_engines, engine_for
from strataflow.pipeline.ingest import ingest_logs
from strataflow.pipeline.rollup import rollup_weeks
from strataflow.timeutil import WEEK, week_bounds, week_start

NAMESPACE = "bench_rollup"
WARM_NAMESPACE = "bench_rollup_warm"
WARM_SCOPES = 8
MESSAGES_PER_SCOPE = 16  # 4 days x 2 exchanges x (user, assistant)
BENCH_BUDGET_TOKENS = 1_000_000_000  # the bench measures throughput; it must not stop on the default budget
REPLIES = [
    "Thanks, noted: {t} is on the list for this week.",
    "Sure, I will check {t} with {p} tomorrow and come back to you.",
    "Got it. Do you want a short summary of {t} on Friday?",
    "好的，我记下了，{t}这周会跟进。",
]
RUNNER = "dask.distributed LocalCluster (processes, 1 thread each), pipeline.rollup.rollup_weeks per shard"
SETTLED_TABLES = ("conversation_messages", "message_keys", "weekly_reports", "llm_cache", "llm_calls")
RESET = (
    text("delete from weekly_reports where namespace = :ns"),
    text("delete from llm_cache where namespace = :ns"),
)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def last_complete_monday(today: datetime) -> datetime:
    """00:00 UTC on the Monday of the last complete ISO week."""
    return week_bounds(week_start(today) - WEEK, UTC)[0]


def write_scopes(path: Path, scopes: int, seed: int) -> None:
    """MESSAGES_PER_SCOPE chat messages per scope in the last complete ISO week, as canonical JSONL."""
    rng = random.Random(seed)
    monday = last_complete_monday(datetime.now(UTC))
    exchanges = MESSAGES_PER_SCOPE // 2
    with path.open("wb") as out:
        for scope in range(scopes):
            for exchange in range(exchanges):
                at = monday + timedelta(days=exchange // 2, hours=9 + 3 * (exchange % 2))
                fill = {"p": rng.choice(PEOPLE), "t": rng.choice(THINGS), "n": rng.randint(2, 95)}
                templates = CHINESE if rng.random() < 0.2 else ENGLISH
                for turn, (role, text_) in enumerate(
                    (("user", rng.choice(templates)), ("assistant", rng.choice(REPLIES)))
                ):
                    record = {
                        "conversation_id": f"c{scope}",
                        "subject_id": f"s{scope:05d}",
                        "source_message_id": f"s{scope}-{exchange}-{turn}",
                        "role": role,
                        "content": text_.format(**fill),
                        "created_at": (at + timedelta(minutes=turn)).isoformat(),
                    }
                    out.write(orjson.dumps(record) + b"\n")


def load(settings: Settings, folder: Path, scopes: int, namespace: str, seed: int) -> int:
    """Write and ingest the scopes' messages; returns the rows inserted."""
    path = folder / f"{namespace}.jsonl"
    write_scopes(path, scopes, seed)
    return ingest_logs(settings, [path], namespace=namespace, progress=False).inserted


def warm_up(settings: Settings, shard: Shard) -> int:
    """On a worker: import litellm, register the offline provider, roll up the warm-up namespace's share."""
    from strataflow.llm import lazy
    from strataflow.llm.offline import register_offline_provider

    lazy.litellm()
    register_offline_provider()
    return rollup_weeks(settings, namespace=WARM_NAMESPACE, shard=shard).reports_written


def peak_rss_mb() -> float:
    """This process's peak resident set size in MB (Linux: ru_maxrss is in KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def settle(engine: Engine) -> None:
    """Vacuum, analyze and checkpoint before a timing, so no background work of the load or the reset lands
    in it."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for table in SETTLED_TABLES:
            conn.execute(text(f"vacuum analyze {table}"))
        conn.execute(text("checkpoint"))


def time_rollup(settings: Settings, engine: Engine, workers: int) -> tuple[float, int, float]:
    """(seconds, reports written, the workers' largest peak RSS in MB) of one rollup of the bench namespace
    on a fresh cluster of `workers` worker processes, one shard each."""
    from dask.distributed import Client, LocalCluster

    with engine.begin() as conn:
        for statement in RESET:
            for namespace in (NAMESPACE, WARM_NAMESPACE):
                conn.execute(statement, {"ns": namespace})
    settle(engine)
    dispose_engines()  # no pooled connection crosses into the workers
    cluster = LocalCluster(
        n_workers=workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        memory_limit=0,
        silence_logs=40,
    )
    with cluster, Client(cluster) as client:
        addresses = sorted(client.scheduler_info()["workers"])
        shards = [Shard(index=index, count=workers) for index in range(workers)]
        warm = [
            client.submit(warm_up, settings, shard, workers=[address], pure=False)
            for shard, address in zip(shards, addresses, strict=True)
        ]
        log(f"{workers} worker(s) warm: {sum(f.result() for f in warm)} warm-up reports")
        run_id = uuid.uuid4()
        started = time.perf_counter()
        futures = [
            client.submit(
                rollup_weeks,
                settings,
                run_id=run_id,
                namespace=NAMESPACE,
                shard=shard,
                workers=[address],
                pure=False,
            )
            for shard, address in zip(shards, addresses, strict=True)
        ]
        results = [future.result() for future in futures]
        elapsed = time.perf_counter() - started
        rss = max(client.run(peak_rss_mb).values())
    failed = sum(result.units_failed for result in results)
    if failed:
        raise RuntimeError(f"{failed} scope-week(s) failed: {results[0].errors[:3]}")
    return elapsed, sum(result.reports_written for result in results), rss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scopes", type=int, default=10_000, help="scopes to load (default 10,000)")
    parser.add_argument("--seed", type=int, default=17)
    args = parser.parse_args()
    settings = load_settings().model_copy(
        update={"rollup_model": "offline/rules", "llm_budget_tokens": BENCH_BUDGET_TOKENS}
    )
    engine = engine_for(settings)
    migrations.upgrade(engine)
    with tempfile.TemporaryDirectory() as folder:
        log(f"loading {args.scopes} scopes x {MESSAGES_PER_SCOPE} messages")
        rows = load(settings, Path(folder), args.scopes, NAMESPACE, args.seed)
        load(settings, Path(folder), WARM_SCOPES, WARM_NAMESPACE, args.seed + 1)
    capacity_before = cpu.parallel_capacity()
    log(f"{rows} rows ingested; two processes get {capacity_before} cores' worth; timing one worker")
    seconds_1, reports_1, rss_1 = time_rollup(settings, engine, 1)
    log(f"one worker: {reports_1} reports in {seconds_1:.1f}s; timing two workers")
    seconds_2, reports_2, rss_2 = time_rollup(settings, engine, 2)
    log(f"two workers: {reports_2} reports in {seconds_2:.1f}s")
    per_s_1, per_s_2 = reports_1 / seconds_1, reports_2 / seconds_2
    capacity = [capacity_before, cpu.parallel_capacity()]
    figures: dict[str, Any] = {
        "scopes": args.scopes,
        "messages_per_scope": MESSAGES_PER_SCOPE,
        "scopes_per_s_1": round(per_s_1, 2),
        "scopes_per_s_2": round(per_s_2, 2),
        "ratio": round(per_s_2 / per_s_1, 3),
        "hours_for_10k": round(10_000 / per_s_1 / 3600, 3),
        "peak_rss_mb": round(max(peak_rss_mb(), rss_1, rss_2), 1),
        "parallel_capacity": capacity,  # before and after the timings (bench/cpu.py): 2.0 on two free cores
        "model": settings.rollup_model,
        "runner": RUNNER,
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
