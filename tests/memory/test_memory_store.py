"""L2 versioning rules of strataflow.memory.store (plain functions on the rolled-back `conn`)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Connection, text

from strataflow.memory.store import delete_item, upsert_item

MARCH = datetime(2026, 3, 1, tzinfo=UTC)
JUNE = datetime(2026, 6, 1, tzinfo=UTC)
NOV = datetime(2026, 11, 1, tzinfo=UTC)


def put(conn: Connection, value: object, when: datetime, statement: str | None = None, **kw: object) -> str:
    return upsert_item(
        conn,
        namespace="ms",
        subject_id="s1",
        kind=kw.pop("kind", "fact"),
        key=kw.pop("key", "location"),
        value=value,
        statement=statement or f"I live in {value}",
        event_at=when,
        source_message_ids=[1],
        **kw,
    )


def current(conn: Connection, key: str = "location") -> tuple:
    return tuple(
        conn.execute(
            text(
                "select value, version, valid_from, source, status from memory_items"
                " where namespace = 'ms' and subject_id = 's1' and key = :k"
            ),
            {"k": key},
        ).one()
    )


def history(conn: Connection, key: str = "location") -> list[tuple]:
    return [
        tuple(r)
        for r in conn.execute(
            text(
                "select version, action, value, valid_from, valid_to, superseded_at is not null,"
                " note is not null"
                " from memory_item_versions where namespace = 'ms' and subject_id = 's1' and key = :k"
                " order by version_id"
            ),
            {"k": key},
        )
    ]


def test_new_then_unchanged_writes_one_version(conn):
    assert put(conn, "杭州", JUNE) == "new"
    assert put(conn, "杭州", NOV) == "unchanged"
    assert current(conn) == ("杭州", 1, JUNE, "extracted", "active")
    assert history(conn) == [(1, "new", "杭州", JUNE, None, False, False)]


def test_changed_value_closes_the_old_version_at_the_new_event_time(conn):
    put(conn, "杭州", JUNE)
    assert put(conn, "上海", NOV) == "content_modified"
    assert current(conn) == ("上海", 2, NOV, "extracted", "active")
    assert history(conn) == [
        (1, "new", "杭州", JUNE, NOV, True, False),
        (2, "content_modified", "上海", NOV, None, False, False),
    ]


def test_only_a_new_statement_is_modified_not_content_modified(conn):
    put(conn, "杭州", JUNE)
    assert put(conn, "杭州", NOV, statement="现在还在杭州") == "modified"
    assert history(conn)[-1][:3] == (2, "modified", "杭州")


def test_backfilled_older_value_lands_in_history_and_does_not_replace_the_newer_one(conn):
    put(conn, "上海", NOV)
    assert put(conn, "杭州", MARCH) == "kept_older"
    assert current(conn) == ("上海", 1, NOV, "extracted", "active")
    # the older value keeps its own valid interval: from March until the newer statement
    assert history(conn)[-1] == (1, "content_modified", "杭州", MARCH, NOV, True, True)
    assert put(conn, "杭州", MARCH) == "unchanged"  # the same backfill again writes nothing


def test_extraction_never_overwrites_a_manual_value(conn):
    put(conn, "杭州", JUNE, source="manual")
    assert put(conn, "上海", NOV) == "manual_protected"
    assert current(conn) == ("杭州", 1, JUNE, "manual", "active")
    assert history(conn)[-1][1:3] == ("content_modified", "上海") and history(conn)[-1][6] is True
    assert put(conn, "深圳", NOV, source="manual") == "content_modified"  # a person may change it


def test_delete_then_only_a_newer_statement_restores_the_item(conn):
    put(conn, "杭州", JUNE)
    assert delete_item(conn, namespace="ms", subject_id="s1", kind="fact", key="location", event_at=NOV)
    assert current(conn)[4] == "deleted"
    assert not delete_item(conn, namespace="ms", subject_id="s1", kind="fact", key="location", event_at=NOV)
    assert put(conn, "杭州", JUNE) == "unchanged"  # the statement of version 1 again
    assert put(conn, "上海", JUNE) == "kept_older"
    assert put(conn, "北京", datetime(2026, 12, 1, tzinfo=UTC)) == "new"
    assert current(conn)[0::4] == ("北京", "active")
    assert [h[1] for h in history(conn)] == ["new", "deleted", "content_modified", "new"]


def test_default_importance_follows_the_kind(conn):
    put(conn, "移民香港", JUNE, kind="intent", key="target_city")
    put(conn, 32, JUNE, key="age")
    rows = dict(conn.execute(text("select key, importance from memory_items where namespace = 'ms'")).all())
    assert rows == {"target_city": 80, "age": 70}
