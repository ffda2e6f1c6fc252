"""The bulk ingest pipeline: prepare chunks on one thread, write them on two connections, in file order.

- A preparation thread reads and prepares chunks (enrich.prepare_chunk: validation, language, intent, hash,
  full-text parts, COPY text) at most QUEUED chunks ahead of the writers, so memory stays bounded.
- WRITERS connections write chunks at once (staging.write_chunk, one transaction per chunk): the database
  work of a chunk (stage COPY, key insert, L1 insert with stemming) is most of an ingest's CPU, and two
  backends do it on two cores while the preparation thread runs beside them.
- Order: a chunk claims its keys (inserts the new ones, locks the known ones whose content changed) only
  after the chunk before it has claimed its own (KeysTurn). When one key sits in two chunks, the later
  chunk waits for the earlier one's commit, then finds its row and rewrites it, so the last record in file
  order wins, as it does inside one chunk, whatever the writers' timing. A chunk creates its partitions
  in a short transaction of its own first, so it never waits for its turn while holding a partition lock
  that an earlier chunk needs.
- The reader's first chunk starts, and its last chunk ends, with small pieces (ramped), so the writers
  start early and the last write is short.
- The cyclic garbage collector is paused and the GIL switch interval shortened while it runs
  (bulk_interpreter).
"""

from __future__ import annotations

import gc
import logging
import queue
import sys
import threading
import uuid
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime
from types import TracebackType
from typing import Any

import psycopg
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import OperationalError

from strataflow.ingest.enrich import ChunkOptions, PreparedChunk, prepare_chunk
from strataflow.ingest.fulltext import Lexicon, lexicon_for
from strataflow.ingest.readers import ReadItem
from strataflow.ingest.staging import ChunkCounts, KeyClaims, ensure_weeks, write_chunk

logger = logging.getLogger(__name__)

WRITERS = 2  # database connections writing chunks at once
QUEUED = 1  # prepared chunks waiting for a writer (more only holds memory: preparing is the faster side)
SWITCH_INTERVAL_S = 0.001  # see bulk_interpreter
FIRST_CHUNK_ROWS = 1000  # the first piece of an input (see ramped)


# A chunk's commit does not wait for its WAL flush: the run's last commits (the file's watermark, the
# pipeline_runs row) are synchronous and flush the WAL past every chunk, so a crash before them loses at
# most chunks of a file that has no watermark yet, which the next run ingests again.
CHUNK_SETTINGS = text("select set_config('synchronous_commit', 'off', true)")


class AnotherChunkFailed(RuntimeError):
    """Another chunk of the run failed, so this chunk stops before claiming keys (the ingest fails anyway);
    ingest_chunks raises that chunk's error instead (first_failure)."""


class KeysTurn:
    """Entered around claiming a chunk's keys: waits for the previous chunk's claim, then lets the next go."""

    def __init__(self, previous: KeysTurn | None, failed: threading.Event) -> None:
        self.previous = previous
        self.failed = failed
        self.done = threading.Event()

    def __enter__(self) -> None:
        if self.previous is not None:
            self.previous.done.wait()
        if self.failed.is_set():
            raise AnotherChunkFailed("another chunk of this ingest failed")

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.done.set()


class WriterConnections:
    """One connection per writer thread, held for the whole run (no pool checkout, ping or reconnect per
    chunk; the staging tables stay created), closed when the run ends."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.local = threading.local()
        self.opened: list[Connection] = []
        self.lock = threading.Lock()

    def mine(self) -> Connection:
        conn: Connection | None = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.engine.connect()
            self.local.conn = conn
            with self.lock:
                self.opened.append(conn)
        return conn

    def __enter__(self) -> WriterConnections:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for conn in self.opened:
            conn.close()


def ingest_chunks(
    engine: Engine,
    chunks: Iterator[list[ReadItem]],
    options: ChunkOptions,
    run_id: uuid.UUID | None,
    bar: Any = None,
    writers: int = WRITERS,
) -> ChunkCounts:
    """Prepare and write every chunk, one transaction each, keys claimed in file order (module docstring)."""
    total = ChunkCounts()
    failed = threading.Event()
    previous: KeysTurn | None = None
    weeks_ready: set[datetime] = set()  # partitions this run has ensured (committed) already
    claims = KeyClaims()
    connections = WriterConnections(engine)
    with (
        bulk_interpreter(),
        connections,
        ThreadPoolExecutor(max_workers=writers, thread_name_prefix="ingest-write") as pool,
    ):
        pending: deque[Future[ChunkCounts]] = deque()
        try:
            prepared_chunks = _prepared_in_background(ramped(chunks), options, lexicon_for(engine))
            for items_read, prepared in prepared_chunks:
                turn = KeysTurn(previous, failed)
                pending.append(
                    pool.submit(
                        _write_in_turn,
                        connections,
                        prepared,
                        items_read,
                        run_id,
                        options,
                        turn,
                        weeks_ready,
                        claims,
                    )
                )
                previous = turn
                while len(pending) >= writers:
                    _add_counts(total, pending.popleft().result(), bar)
            while pending:
                _add_counts(total, pending.popleft().result(), bar)
        except BaseException as error:
            failed.set()  # chunks still waiting for their turn stop instead of writing
            cause = first_failure(error, pending)
            if cause is not error:
                raise cause from None
            raise
    return total


def first_failure(error: BaseException, pending: deque[Future[ChunkCounts]]) -> BaseException:
    """The error to report: a chunk that stopped because another failed (a later chunk can fail first, for
    example while creating its partitions) points at the chunk that did fail, which is still pending."""
    if not isinstance(error, AnotherChunkFailed):
        return error
    for future in pending:
        cause = future.exception()  # waits for that chunk to end
        if cause is not None and not isinstance(cause, AnotherChunkFailed):
            return cause
    return error


def _write_in_turn(
    connections: WriterConnections,
    prepared: PreparedChunk,
    items_read: int,
    run_id: uuid.UUID | None,
    options: ChunkOptions,
    turn: KeysTurn,
    weeks_ready: set[datetime],
    claims: KeyClaims,
) -> ChunkCounts:
    try:
        conn = connections.mine()
        weeks = [week for week in prepared.weeks if week not in weeks_ready]
        if weeks:
            with conn.begin():
                ensure_weeks(conn, weeks)
            weeks_ready.update(weeks)
        for attempt in range(1, 4):
            try:
                with conn.begin():
                    conn.execute(CHUNK_SETTINGS)
                    return write_chunk(
                        conn,
                        prepared,
                        items_read,
                        run_id,
                        options.retention_days,
                        partitions_ready=True,
                        keys_turn=turn,
                        claims=claims,
                    )
            except OperationalError as exc:
                # Chunks of one run claim keys in order and cannot deadlock each other; a deadlock with
                # another session is retried, and the retry no longer waits for its turn.
                if not isinstance(exc.orig, psycopg.errors.DeadlockDetected) or attempt == 3:
                    raise
                logger.info(
                    "chunk write deadlocked with another transaction; retrying (attempt %d)", attempt + 1
                )
        raise AssertionError("unreachable")
    except BaseException:
        turn.failed.set()
        raise
    finally:
        turn.done.set()  # also when the chunk had no rows (it never entered its turn) or failed


def _add_counts(total: ChunkCounts, counts: ChunkCounts, bar: Any) -> None:
    for name in ("read", "inserted", "updated", "skipped", "quarantined"):
        setattr(total, name, getattr(total, name) + getattr(counts, name))
    if bar is not None:
        bar(counts.read)


def ramped(chunks: Iterator[list[ReadItem]], first: int = FIRST_CHUNK_ROWS) -> Iterator[list[ReadItem]]:
    """The same items in the same order, with small pieces at both ends.

    The reader's first chunk starts with pieces of first, 2*first, 4*first, ... rows, so the writers
    start as soon as a small piece is prepared; the last chunk (known once the reader has nothing more)
    ends with pieces of half, a quarter, ... of it, down to first/2 rows, so the last write after the
    preparation has finished is short. A 10k-row file goes as 1k, 2k, 4k, 1.5k, 750 and 750 rows.
    """
    pending: list[ReadItem] = []
    for index, chunk in enumerate(chunks):
        if pending:
            yield pending
        pending = chunk
        if index == 0:
            size = first
            while size < len(pending):
                yield pending[:size]
                pending = pending[size:]
                size *= 2
    smallest = max(1, first // 2)
    while len(pending) > 2 * smallest:
        half = len(pending) // 2
        yield pending[:half]
        pending = pending[half:]
    if pending:
        yield pending


_DONE = object()


def _prepared_in_background(
    chunks: Iterator[list[ReadItem]], options: ChunkOptions, lexicon: Lexicon
) -> Iterator[tuple[int, PreparedChunk]]:
    results: queue.Queue[Any] = queue.Queue(maxsize=QUEUED)
    stop = threading.Event()

    def produce() -> None:
        try:
            for items in chunks:
                if stop.is_set():
                    return
                prepared = prepare_chunk(items, options, lexicon=lexicon)
                prepared.rows = []  # written from payload; the tuples would only hold memory
                results.put((len(items), prepared))
            results.put(_DONE)
        except BaseException as exc:  # handed to the consuming thread, which re-raises it
            results.put(exc)

    worker = threading.Thread(target=produce, name="ingest-prepare", daemon=True)
    worker.start()
    try:
        while True:
            item = results.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        while worker.is_alive():  # unblock a producer waiting on a full queue
            try:
                results.get(timeout=0.1)
            except queue.Empty:
                pass


_bulk_lock = threading.Lock()
_bulk_runs = 0
_saved: tuple[bool, float] = (True, 0.005)


@contextmanager
def bulk_interpreter() -> Iterator[None]:
    """Interpreter settings for a bulk pipeline, restored when the last one ends (they are per process).

    - The cyclic garbage collector is paused. The pipeline makes no reference cycles, so reference counting
      frees all it allocates; but it allocates millions of short-lived containers, and in a process that
      has imported Prefect (about 140k tracked objects) the collector's passes cost about a third of the
      preparation time. Cycles made by other threads meanwhile are collected when the pipeline ends.
    - The GIL switch interval is 1 ms instead of 5 ms: a writer thread needs the GIL back after each wait
      on the database (every statement, every 128 KB of COPY data), and while the preparation thread runs
      it waits up to the switch interval each time.
    """
    global _bulk_runs, _saved
    with _bulk_lock:
        if _bulk_runs == 0:
            _saved = (gc.isenabled(), sys.getswitchinterval())
            gc.disable()
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        _bulk_runs += 1
    try:
        yield
    finally:
        with _bulk_lock:
            _bulk_runs -= 1
            if _bulk_runs == 0:
                was_enabled, interval = _saved
                sys.setswitchinterval(interval)
                if was_enabled:
                    gc.enable()
