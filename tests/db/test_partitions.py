"""Weekly L1 partitions: created on demand, also by two writers racing for the same week."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from sqlalchemy import Engine, text

ENSURE = text("select ensure_message_partitions(:a, :a)")


def test_partitions_cover_any_date_once(engine: Engine) -> None:
    at = datetime(1999, 3, 10, 12, tzinfo=UTC)  # a Wednesday: its ISO week starts Monday 1999-03-08
    with engine.begin() as conn:
        first = conn.execute(ENSURE, {"a": at}).scalar()
        again = conn.execute(ENSURE, {"a": at}).scalar()
        bounds = conn.execute(
            text("select pg_get_expr(relpartbound, oid) from pg_class where relname = :name"),
            {"name": "conversation_messages_w1999_10"},
        ).scalar()
    assert (first, again) == (1, 0)
    assert "'1999-03-08 00:00:00+00'" in bounds and "'1999-03-15 00:00:00+00'" in bounds


def test_a_writer_that_loses_the_race_for_a_new_partition_does_not_fail(engine: Engine) -> None:
    at = datetime(1998, 6, 3, tzinfo=UTC)
    errors: list[BaseException] = []
    with engine.connect() as first:
        tx = first.begin()
        assert first.execute(ENSURE, {"a": at}).scalar() == 1  # created, not yet committed

        def second_writer() -> None:
            try:
                with engine.begin() as second:  # sees no partition yet, then waits for the first's lock
                    second.execute(ENSURE, {"a": at})
            except BaseException as exc:  # noqa: BLE001 - reported to the main thread
                errors.append(exc)

        thread = threading.Thread(target=second_writer)
        thread.start()
        thread.join(timeout=1.0)  # let it block on the advisory lock
        tx.commit()
        thread.join(timeout=30)
    assert not thread.is_alive()
    assert errors == []
