"""The bulk pipeline writes what the old path wrote, row for row; the last record in file order wins.

Old path: tests/ingest/legacy_prepare.py (every record through pydantic, rows rendered one by one), one
chunk after another on one connection. New path: strataflow.pipeline.ingest.ingest_logs (fast path, ordered
writers).
"""

from __future__ import annotations

import csv
import gc
import json
import sys
import threading
import time
from collections import deque
from concurrent.futures import Future
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import NullPool

from strataflow.config import Settings
from strataflow.demo.sample import write_sample
from strataflow.ingest.enrich import ChunkOptions
from strataflow.ingest.pipeline import AnotherChunkFailed, first_failure
from strataflow.ingest.readers import detect_format, expand_paths, read_chunks
from strataflow.ingest.staging import ChunkCounts, write_chunk
from strataflow.pipeline.ingest import ingest_logs
from tests.ingest.legacy_prepare import legacy_prepare_chunk

# Processing times, run ids, generated ids and the namespace (each path writes its own) are left out.
NOT_COMPARED = {
    "message_id",
    "namespace",
    "ingested_at",
    "updated_at",
    "ingest_seq",
    "run_id",
    "first_ingested_at",
    "quarantine_id",
    "created_at",
}
TIME = "2026-11-02T09:00:00Z"
# (line, field, reason) of each odd record that is quarantined (see odd_records).
QUARANTINED = [
    (3, "subject_id", "missing_field"),
    (4, "role", "unknown_role"),
    (5, "role", "unknown_role"),
    (6, "created_at", "bad_timestamp"),
    (7, "created_at", "bad_timestamp"),
    (13, "created_at", "bad_timestamp"),
    (16, "source_message_id", "wrong_type"),
    (17, "source_message_id", "empty_value"),
    (18, "source_message_id", "value_too_long"),
    (19, "subject_id", "nul_character"),
    (20, "content", "empty_content"),
    (21, "content", "empty_content"),
    (22, "content", "nul_character"),
    (23, "content", "wrong_type"),
    (24, "content", "content_too_long"),
    (25, "metadata", "nul_character"),
    (26, "metadata", "wrong_type"),
    (27, "metadata", "wrong_type"),
    (31, "lang", "value_too_long"),
    (37, "role", "unknown_role"),
    (38, "created_at", "bad_timestamp"),
    (40, None, "malformed_json"),
    (41, None, "not_an_object"),
    (42, None, "invalid_utf8"),
]


def record(i: int | str, content: Any = "We shipped the release.", **fields: Any) -> dict[str, Any]:
    return {
        "conversation_id": "c1",
        "subject_id": "alice",
        "source_message_id": f"m{i}",
        "role": "user",
        "content": content,
        "created_at": TIME,
        **fields,
    }


def odd_records() -> list[dict[str, Any] | str | bytes]:
    """Every validation problem, and valid records the fast path leaves to pydantic, and escapes."""
    no_subject = record(3)
    del no_subject["subject_id"]
    return [
        record(1, "Can you review the deploy before Friday?"),
        record(2, "我在杭州做前端开发，工作五年了。", created_at="2026-11-03T10:00:00"),
        no_subject,
        record(4, role="wizard"),
        record(5, role="User"),
        record(6, created_at="yesterday-ish"),
        record(7, created_at="1900-01-01T00:00:00Z"),
        record(8, created_at="2026-11-02"),  # a date: midnight in the run's zone
        record(9, created_at=1793000000),  # unix seconds
        record(10, created_at="2026-11-02 09:00:00+0800"),
        record(11, created_at="2026-11-02T09:00:00.1234567z"),
        record(12, created_at="2026-11-02 09:00:00.5"),
        record(13, created_at="2026-02-30T09:00:00Z"),
        {**record(14), "source_message_id": 14, "conversation_id": 7},  # numbers become text
        {**record(15), "source_message_id": 1.5},
        {**record(16), "source_message_id": True},
        {**record(17), "source_message_id": ""},
        {**record(18), "source_message_id": "x" * 513},
        {**record(19), "subject_id": "al\x00ice"},
        record(20, ""),
        record(21, " \n\t "),
        record(22, "a\x00b"),
        record(23, 42),
        record(24, "x" * 20_001),
        record(25, metadata={"note": "nul \x00 here"}),
        record(26, metadata="not an object"),
        record(27, metadata=["a", "list"]),
        record(28, metadata={"speaker": "Bob", "nested": {"n": [1, 2.5, None, True]}}),
        record(29, agent_id=""),
        record(30, agent_id="bot-7", lang="zh"),
        record(31, lang="x" * 17),
        record(32, namespace="their_namespace", source="their_source"),
        record(33, "tab\there, a new\nline, a back\\slash and a\rreturn"),
        {**record(34), "source_message_id": "m\t34"},
        record(35, "first version of 35"),
        record(35, "second version of 35, which wins"),
        record(36, role=None),
        record(37, created_at=None),
        record(38, namespace=5),
        '{"conversation_id": "c1", "content": "',
        "[1, 2, 3]",
        b'{"conversation_id": "c1", "content": "\xff\xfe"}',
    ]


def write_jsonl(path: Path, records: list[dict[str, Any] | str | bytes]) -> None:
    with path.open("wb") as out:
        for r in records:
            line = r if isinstance(r, bytes) else (r if isinstance(r, str) else json.dumps(r)).encode()
            out.write(line + b"\n")


def write_inputs(directory: Path) -> None:
    """The generated sample (JSONL), its English half as CSV and Parquet, and the odd records."""
    write_sample(directory, subjects=2, weeks=3, seed=5, end_date=date(2026, 11, 20))
    english = [json.loads(line) for line in (directory / "project_en.jsonl").open()]
    with (directory / "project_en_copy.csv").open("w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=[*english[0].keys()])
        writer.writeheader()
        writer.writerows({**r, "metadata": json.dumps(r["metadata"])} for r in english)
    table = [{**r, "created_at": datetime.fromisoformat(r["created_at"])} for r in english]
    for r in table:
        r["metadata"] = json.dumps(r["metadata"])
    pq.write_table(pa.Table.from_pylist(table), directory / "project_en_copy.parquet")
    write_jsonl(directory / "odd.jsonl", odd_records())


def old_path(engine: Engine, settings: Settings, directory: Path, namespace: str) -> None:
    for path in expand_paths([str(directory)]):
        options = ChunkOptions(
            default_source=path.name,
            tz=settings.tz,
            max_content_chars=settings.max_content_chars,
            retention_days=settings.retention_days,
            namespace=namespace,
        )
        for items in read_chunks(path, detect_format(path), settings.ingest_chunk_rows, settings.tz):
            with engine.begin() as conn:
                write_chunk(
                    conn, legacy_prepare_chunk(items, options), len(items), None, settings.retention_days
                )


def table_rows(engine: Engine, table: str, namespace: str, order: str) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        result = conn.execute(
            text(f"select * from {table} where namespace = :ns order by {order}"), {"ns": namespace}
        )
        return [{k: v for k, v in row.items() if k not in NOT_COMPARED} for row in result.mappings()]


def test_the_old_and_new_paths_write_the_same_rows_keys_and_quarantine(
    settings: Settings, engine: Engine, namespace: str, tmp_path: Path
) -> None:
    small_chunks = settings.model_copy(update={"ingest_chunk_rows": 100})  # many chunks, both writers busy
    write_inputs(tmp_path)
    old_path(engine, small_chunks, tmp_path, f"{namespace}_old")
    interval = sys.getswitchinterval()
    ingest_logs(small_chunks, [tmp_path], namespace=f"{namespace}_new", progress=False)
    assert gc.isenabled() and sys.getswitchinterval() == interval  # the pipeline restores both

    for table, order in (
        ("conversation_messages", "source, source_message_id"),
        ("message_keys", "source, source_message_id"),
        ("quarantine", "source, position::int"),
    ):
        old = table_rows(engine, table, f"{namespace}_old", order)
        new = table_rows(engine, table, f"{namespace}_new", order)
        assert len(new) == len(old) > 0, table
        for old_row, new_row in zip(old, new, strict=True):
            assert new_row == old_row, table
    messages = table_rows(engine, "conversation_messages", f"{namespace}_new", "source")
    assert {m["source"] for m in messages} >= {
        "consulting_zh.jsonl",
        "project_en.jsonl",
        "project_en_copy.csv",
        "project_en_copy.parquet",
        "odd.jsonl",
        "their_source",
    }
    quarantined = table_rows(engine, "quarantine", f"{namespace}_new", "position::int")
    assert [(int(q["position"]), q["field"], q["reason"]) for q in quarantined] == QUARANTINED


def hold_key_until_a_writer_waits(
    engine: Engine, namespace: str, key: str, held: threading.Event, errors: list[BaseException]
) -> None:
    """Hold an uncommitted message_keys row for `key` until an ingest writer waits for it, then 1 s more."""
    engine = create_engine(engine.url, poolclass=NullPool)  # not the pool the ingest writers draw from
    try:
        with engine.connect() as conn:
            conn.execute(
                text(
                    "insert into message_keys (namespace, source, source_message_id, subject_id, "
                    "conversation_id, event_at, content_hash) "
                    "values (:ns, 'repeats.jsonl', :key, 'alice', 'c1', now(), 'held')"
                ),
                {"ns": namespace, "key": key},
            )
            me = conn.execute(text("select pg_backend_pid()")).scalar()
            held.set()
            deadline = time.monotonic() + 120
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as watch:  # fresh stats
                while not watch.execute(WAITING_FOR, {"pid": me}).scalar():
                    if time.monotonic() > deadline:
                        raise TimeoutError("no ingest writer ever waited for the held key")
                    time.sleep(0.02)
            time.sleep(1.0)  # the next chunk's writer would claim its keys now, if nothing kept the order
            conn.rollback()
    except BaseException as exc:  # reported by the test
        errors.append(exc)
    finally:
        held.set()
        engine.dispose()


WAITING_FOR = text("select count(*) from pg_stat_activity where :pid = any(pg_blocking_pids(pid))")


def test_the_last_record_in_file_order_wins_when_a_key_repeats_across_chunks(
    settings: Settings, engine: Engine, namespace: str, tmp_path: Path
) -> None:
    # Keys k0..k19 sit in each of 30 chunks of 100 lines, with the chunk's number in the content. The
    # writer of chunk 28 is held up (its extra key 'mhold' is held by another transaction) while the
    # writer of chunk 29 is free: chunk 29 must still claim its keys after chunk 28, so version 29 wins.
    lines: list[dict[str, Any] | str | bytes] = []
    for chunk in range(30):
        lines.extend(record(f"k{i}", f"version {chunk} of k{i}, with more words to stem") for i in range(20))
        lines.extend(record(f"c{chunk}-{i}", "A new message.") for i in range(79))
        lines.append(record("hold" if chunk == 28 else f"c{chunk}-last", "The last line of a chunk."))
    write_jsonl(tmp_path / "repeats.jsonl", lines)
    small_chunks = settings.model_copy(update={"ingest_chunk_rows": 100})
    errors: list[BaseException] = []
    held = threading.Event()
    holder = threading.Thread(
        target=hold_key_until_a_writer_waits, args=(engine, namespace, "mhold", held, errors)
    )
    holder.start()
    held.wait()

    result = ingest_logs(small_chunks, [tmp_path / "repeats.jsonl"], namespace=namespace, progress=False)

    holder.join()
    assert errors == []
    assert (result.read, result.inserted, result.updated, result.skipped) == (3000, 20 + 30 * 80, 20 * 29, 0)
    with engine.connect() as conn:
        contents = dict(
            conn.execute(
                text(
                    "select m.source_message_id, m.content from conversation_messages m "
                    "join message_keys k using (message_id) "
                    "where m.namespace = :ns and m.source_message_id like 'mk%' "
                    "and k.content_hash = m.content_hash"
                ),
                {"ns": namespace},
            ).all()
        )
    assert contents == {f"mk{i}": f"version 29 of k{i}, with more words to stem" for i in range(20)}


def test_a_chunk_stopped_by_another_reports_the_chunk_that_failed() -> None:
    """A later chunk can fail first (while creating its partitions, say); the earlier chunk then stops at its
    turn with AnotherChunkFailed, and the ingest must raise the later chunk's own error, not that one."""
    stopped: Future[ChunkCounts] = Future()
    stopped.set_exception(AnotherChunkFailed("another chunk of this ingest failed"))
    failed: Future[ChunkCounts] = Future()
    failed.set_exception(ValueError("deadlock detected while creating conversation_messages_w2023_15"))
    done: Future[ChunkCounts] = Future()
    done.set_result(ChunkCounts(read=1, inserted=1))

    reported = first_failure(AnotherChunkFailed("another chunk of this ingest failed"), deque([done, failed]))
    assert isinstance(reported, ValueError) and "w2023_15" in str(reported)
    original = KeyError("source_message_id")
    assert first_failure(original, deque([stopped, failed])) is original  # a chunk's own error stays
