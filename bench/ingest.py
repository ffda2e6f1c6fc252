"""Ingest throughput vs a raw COPY of the same rows: `python -m bench.ingest [--rows N]`.

Generates N English chat messages as a JSONL file (streamed to disk), then in the same run, --rounds times
(default 5), each round on fresh tables (the previous round's rows removed, their emptied partitions
dropped; the window goes back in whole weeks until no L1 partition of its weeks holds other rows, see
free_window):
- baseline: stream that file, json-parse each line and COPY its columns (plus message_id, content_hash and
  expires_at, which the table requires) into bench_copy_messages, a table partitioned and indexed exactly
  like conversation_messages; no validation, dedup, intent, language or full-text vector;
- ingest: strataflow.pipeline.ingest.ingest_logs on the same file into namespace bench_ingest (validation,
enrichment,
  staging COPY, message_keys dedup, upsert into conversation_messages, full-text vector; no embedding),
  through the bulk pipeline of strataflow/ingest/pipeline.py (docs/ingest-performance.md).
`ratio` is the median of the rounds' COPY-over-ingest fractions (`by_round`): each ingest is paired with the
baseline measured just before it, and the median of a few rounds is steadier than one pair on a shared
machine, where one run's rate moves by a fifth; now and then one round comes out near half the others, and
with five rounds one such round does not set the median. The first round also carries the process's first
ingest (the full-text lexicon asks the database for the file's words: 0.02 s here); later rounds do not.
Then the ingest path alone on a smaller half-Chinese file (jieba segmentation) for zh_rows_per_s, and on an
English file of the same size for en_small_rows_per_s: a file of a few thousand rows goes slower per row
than 200k (the pipeline's start and its ramped first and last chunks weigh more), so `zh_share`, Chinese
over English, compares files of one size.
Beside the wall times, the CPU seconds of each phase, this process's and the server's (bench/cpu.py):
`copy_cpu_s`, `ingest_cpu_s`, the cores each phase kept busy (`*_cores_used`) and `cpu_copy_over_ingest`.
The ingest needs two cores to keep up with a one-thread COPY; a VM that gives the run less shows as
`ingest_cores_used` well under 2 with `cpu_copy_over_ingest` unchanged, which the wall-time ratio alone
cannot tell from a slower ingest. (The first round's client CPU includes importing the ingest's modules.)
`parallel_capacity`, before and after the rounds, is how many cores' worth of a fixed loop two processes
get through at once (2.0 on two free cores; bench/cpu.py).
Prints one JSON line last (with the 1-minute load average before and after: the machine is shared, and a
loaded machine lowers the ratio); progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
from sqlalchemy import Engine, text

from bench import cpu
from strataflow.config import Settings, load_settings
from strataflow.db import migrations
from strataflow.db.engine import engine_for
from strataflow.hashes import content_hash
from strataflow.textsearch import chinese_tokens
from strataflow.timeutil import WEEK, mondays, week_bounds, week_start

COPY_TABLE = "bench_copy_messages"
SELECT_PARTITIONS = text(
    "select c.relname from pg_inherits as i join pg_class as c on c.oid = i.inhrelid "
    "where i.inhparent = cast('conversation_messages' as regclass) and c.relname = any(:names)"
)
NAMESPACES = ("bench_ingest", "bench_ingest_zh", "bench_ingest_en_small")
BASELINE = (
    "stream the same JSONL, json-parse each line, COPY its columns (+ message_id, content_hash, "
    "expires_at and a full-text vector of the same words, unstemmed, built in Python) in the same chunk "
    "size into a table with the columns, weekly partitions and indexes of conversation_messages; no "
    "validation, dedup, intent, language detection, stemming or key table"
)
WORD = re.compile(r"[a-z0-9]+")
PEOPLE = ["Alice", "Bob", "Carol", "Dan", "Erin", "Frank", "Grace", "Heidi", "Ivan", "Judy"]
THINGS = ["the deploy", "the API", "the dashboard", "the migration", "the release", "the login page", "CI"]
ENGLISH = [
    "Hi {p}, can you review {t} before Friday?",
    "We decided to postpone {t} because the load tests failed twice.",
    "Status: {t} is about {n}% done, {p} is on it.",
    "I prefer smaller pull requests for {t}, they are easier to review.",
    "Thanks {p}, {t} looks good to me.",
    "How long will {t} take if we add two more engineers?",
    "{p} said {t} was blocked on the database upgrade last week.",
    "Let's go with Postgres for {t}; it keeps the stack simple.",
]
CHINESE = [
    "我今年{n}岁，在杭州做前端开发，想了解一下高才通。",
    "{p}说{t}的进度已经完成了{n}%，下周上线。",
    "请帮我看看优才计划需要准备哪些材料？",
    "我们决定先做{t}，因为客户很着急。",
    "我本科是浙大的，读的计算机，工作{n}年了。",
]


def write_messages(path: Path, rows: int, chinese_share: float, seed: int, start: datetime) -> None:
    rng = random.Random(seed)
    with path.open("wb") as out:
        for i in range(rows):
            templates = CHINESE if rng.random() < chinese_share else ENGLISH
            content = rng.choice(templates).format(
                p=rng.choice(PEOPLE), t=rng.choice(THINGS), n=rng.randint(2, 95)
            )
            record = {
                "conversation_id": f"c{i // 20}",
                "subject_id": f"u{i % 500}",
                "source_message_id": f"m{i}",
                "role": "user" if i % 2 == 0 else "assistant",
                "content": content,
                "created_at": (start + timedelta(seconds=i * 3)).isoformat(),
                "metadata": {"channel": "bench"},
            }
            out.write(orjson.dumps(record) + b"\n")


def clean(engine: Engine, first: datetime, last: datetime) -> None:
    """Remove the bench's own rows and table (so later stages never embed or extract bench data).

    L1 partitions of the bench's weeks that hold nothing else afterwards are dropped, and message_keys is
    vacuumed (settle): the next run's ingest then writes into fresh partitions and reclaimed key pages, as
    its baseline writes into a fresh table. Deleted rows left in place would make every later run's ingest
    step over their dead index entries (a second run in one home measured lower for that alone).
    """
    with engine.begin() as conn:
        for namespace in NAMESPACES:
            conn.execute(text("delete from conversation_messages where namespace = :ns"), {"ns": namespace})
            conn.execute(text("delete from message_keys where namespace = :ns"), {"ns": namespace})
            conn.execute(text("delete from watermarks where namespace = :ns"), {"ns": namespace})
        conn.execute(text(f"drop table if exists {COPY_TABLE}"))
        names = [f"conversation_messages_w{week:%G_%V}" for week in bench_weeks(first, last)]
        for (partition,) in conn.execute(SELECT_PARTITIONS, {"names": names}).all():
            if not conn.execute(text(f"select exists (select from {partition})")).scalar():
                conn.execute(text(f"drop table {partition}"))


def free_window(engine: Engine, rows: int) -> tuple[datetime, datetime]:
    """(first, last): the bench's time window, 41 days ago or whole weeks further back, so that no L1
    partition of its weeks holds anybody else's rows.

    A partition that holds other rows (the sample's six weeks, a team's data) is never dropped by clean(), so
    every round after the first would write its ingest over the dead rows of the round before, while the
    baseline writes into a fresh table: the scale check's home measured 0.05-0.1 lower for that alone.
    """
    first = datetime.now(UTC) - timedelta(days=41)
    for _ in range(520):  # ten years back at most
        last = first + timedelta(days=1, seconds=3 * rows)
        clean(engine, first, last)  # the bench's own leftovers, and their emptied partitions
        names = [f"conversation_messages_w{week:%G_%V}" for week in bench_weeks(first, last)]
        with engine.connect() as conn:
            if not conn.execute(SELECT_PARTITIONS, {"names": names}).first():
                return first, last
        first -= timedelta(days=7)
    raise SystemExit("bench: no ten-year stretch of weeks without L1 partitions in this database")


def bench_weeks(first: datetime, last: datetime) -> list[datetime]:
    """The Mondays (00:00 UTC) of the weeks from the one before first's to last's: the copy table's
    partitions, and the L1 partitions the bench may leave behind."""
    weeks = mondays(week_start(first, UTC) - WEEK, last.astimezone(UTC).date())
    return [week_bounds(monday, UTC)[0] for monday in weeks]


def prepare(engine: Engine, first: datetime, last: datetime) -> None:
    """Empty bench namespaces and a fresh copy table with L1's columns, partitions and indexes (untimed)."""
    clean(engine, first, last)
    with engine.begin() as conn:
        conn.execute(
            text(
                f"create table {COPY_TABLE} (like conversation_messages including all) "
                "partition by range (event_at)"
            )
        )
        conn.execute(text("select ensure_message_partitions(:lo, :hi)"), {"lo": first, "hi": last})
        for week in bench_weeks(first, last):
            conn.execute(
                text(
                    f"create table {COPY_TABLE}_w{week:%G_%V} partition of {COPY_TABLE} "
                    f"for values from ('{week.isoformat()}') to ('{(week + WEEK).isoformat()}')"
                )
            )


def settle(engine: Engine) -> None:
    """Vacuum + checkpoint between phases, so one phase's background work does not land in the next."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text(f"vacuum analyze {COPY_TABLE}"))
        conn.execute(text("vacuum message_keys"))
        conn.execute(text("checkpoint"))


def time_copy(engine: Engine, settings: Settings, path: Path) -> float:
    """The baseline (see BASELINE); returns seconds."""
    columns = (
        "message_id, namespace, subject_id, conversation_id, source, source_message_id, role, content, "
        "content_hash, event_at, expires_at, metadata, fts"
    )
    retention = timedelta(days=settings.retention_days)
    chunk_rows = settings.ingest_chunk_rows
    started = time.perf_counter()
    with engine.connect() as conn, path.open("rb") as handle:
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        number = 0
        done = False
        while not done:
            with conn.begin(), cursor.copy(f"copy {COPY_TABLE} ({columns}) from stdin") as copy:
                for _ in range(chunk_rows):
                    line = handle.readline()
                    if not line:
                        done = True
                        break
                    number += 1
                    r = orjson.loads(line)
                    event_at = datetime.fromisoformat(r["created_at"])
                    copy.write_row(
                        (
                            number,
                            "bench_copy",
                            r["subject_id"],
                            r["conversation_id"],
                            path.name,
                            r["source_message_id"],
                            r["role"],
                            r["content"],
                            content_hash(r["content"]),
                            event_at,
                            event_at + retention,
                            orjson.dumps(r["metadata"]).decode(),
                            " ".join(dict.fromkeys(WORD.findall(r["content"].lower()))),
                        )
                    )
    return time.perf_counter() - started


def time_ingest(settings: Settings, path: Path, namespace: str) -> tuple[float, int]:
    from strataflow.pipeline.ingest import ingest_logs

    started = time.perf_counter()
    result = ingest_logs(settings, [path], namespace=namespace, progress=False)
    elapsed = time.perf_counter() - started
    if result.inserted != result.read:
        raise SystemExit(f"bench: ingest inserted {result.inserted} of {result.read} rows: {result}")
    return elapsed, result.inserted


def cpu_figures(
    copy_cpu: list[cpu.CpuSample],
    copy_times: list[float],
    ingest_cpu: list[cpu.CpuSample],
    ingest_times: list[float],
) -> dict[str, object]:
    """Medians over the rounds of each phase's CPU seconds (this process, the server), the cores each phase
    kept busy (CPU over wall time), and `cpu_copy_over_ingest`: the baseline's CPU over the ingest's, which
    does not depend on how many cores the machine gave the run. Server figures are None for a server that is
    not a local process (bench/cpu.py)."""

    def median(values: list[float | None], digits: int = 2) -> float | None:
        known = [value for value in values if value is not None]
        return round(statistics.median(known), digits) if len(known) == len(values) and known else None

    def total(sample: cpu.CpuSample) -> float | None:
        return None if sample.server_s is None else sample.client_s + sample.server_s

    def over(parts: list[float | None], wholes: list[float | None]) -> list[float | None]:
        return [
            None if part is None or whole is None else part / whole
            for part, whole in zip(parts, wholes, strict=True)
        ]

    copy_total, ingest_total = [total(s) for s in copy_cpu], [total(s) for s in ingest_cpu]
    return {
        "copy_cpu_s": {
            "client": median([s.client_s for s in copy_cpu]),
            "server": median([s.server_s for s in copy_cpu]),
        },
        "ingest_cpu_s": {
            "client": median([s.client_s for s in ingest_cpu]),
            "server": median([s.server_s for s in ingest_cpu]),
        },
        "copy_cores_used": median(over(copy_total, list(copy_times))),
        "ingest_cores_used": median(over(ingest_total, list(ingest_times))),
        "cpu_copy_over_ingest": median(over(copy_total, ingest_total), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", type=int, default=1_000_000, help="English messages to ingest (default 1M)."
    )
    parser.add_argument(
        "--zh-rows",
        type=int,
        default=None,
        help="Half-Chinese messages, and as many English (default rows/10, at most 20k).",
    )
    parser.add_argument("--chunk-rows", type=int, default=None, help="Rows per chunk (default: the setting).")
    parser.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="Baseline-then-ingest rounds; ratio is the median of the rounds' ratios (default 5).",
    )
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    zh_rows = args.zh_rows or max(1000, min(args.rows // 10, 20_000))

    load_before = os.getloadavg()[0]
    settings = load_settings(**({"ingest_chunk_rows": args.chunk_rows} if args.chunk_rows else {}))
    engine = engine_for(settings)
    migrations.upgrade(engine)
    first, last = free_window(engine, max(args.rows, zh_rows))
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        english, mixed = Path(tmp) / "bench_en.jsonl", Path(tmp) / "bench_zh.jsonl"
        english_small = Path(tmp) / "bench_en_small.jsonl"
        print(f"generating {args.rows:,} + {zh_rows:,} messages from {first:%Y-%m-%d}", file=sys.stderr)
        start = first + timedelta(days=1)
        write_messages(english, args.rows, 0.0, args.seed, start)
        write_messages(mixed, zh_rows, 0.5, args.seed + 1, start)
        write_messages(english_small, zh_rows, 0.0, args.seed + 2, start)
        copy_times, ingest_times = [], []
        copy_cpu, ingest_cpu = [], []  # CPU seconds of each round's phases (bench/cpu.py)
        postmaster = cpu.postmaster_pid(engine)
        capacity = [cpu.parallel_capacity()]
        for number in range(1, args.rounds + 1):  # each round on fresh tables (prepare)
            prepare(engine, first, last)
            settle(engine)
            print(f"round {number}/{args.rounds}: timing raw COPY", file=sys.stderr)
            before = cpu.sample(postmaster)
            copy_times.append(time_copy(engine, settings, english))
            copy_cpu.append(cpu.used(before, cpu.sample(postmaster)))
            print(f"raw COPY {copy_times[-1]:.1f}s; timing ingest", file=sys.stderr)
            settle(engine)
            before = cpu.sample(postmaster)
            ingest_s, inserted = time_ingest(settings, english, NAMESPACES[0])
            ingest_cpu.append(cpu.used(before, cpu.sample(postmaster)))
            ingest_times.append(ingest_s)
            print(f"ingest {ingest_s:.1f}s (ratio {copy_times[-1] / ingest_s:.3f})", file=sys.stderr)
        capacity.append(cpu.parallel_capacity())
        print("timing half-Chinese ingest", file=sys.stderr)
        chinese_tokens("预热")  # load jieba's dictionary outside the timing (once per process)
        zh_s, zh_inserted = time_ingest(settings, mixed, NAMESPACES[1])
        en_small_s, en_small_inserted = time_ingest(settings, english_small, NAMESPACES[2])
    print("cleaning up", file=sys.stderr)
    clean(engine, first, last)
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    zh_rate, en_small_rate = zh_inserted / zh_s, en_small_inserted / en_small_s
    ratios = [copy_s / ingest_s for copy_s, ingest_s in zip(copy_times, ingest_times, strict=True)]
    figures = {
        "rows": args.rows,
        "ingest_rows_per_s": round(inserted / statistics.median(ingest_times), 1),
        "copy_rows_per_s": round(args.rows / statistics.median(copy_times), 1),
        "ratio": round(statistics.median(ratios), 3),
        "by_round": [round(ratio, 3) for ratio in ratios],
        "peak_rss_mb": round(peak_rss_mb, 1),
        "zh_rows": zh_inserted,
        "zh_rows_per_s": round(zh_rate, 1),
        "en_small_rows_per_s": round(en_small_rate, 1),
        "zh_share": round(zh_rate / en_small_rate, 3),
        **cpu_figures(copy_cpu, copy_times, ingest_cpu, ingest_times),
        "parallel_capacity": capacity,  # before and after the rounds (bench/cpu.py): 2.0 on two free cores
        "chunk_rows": settings.ingest_chunk_rows,
        "load_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)],
        "baseline": BASELINE,
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
