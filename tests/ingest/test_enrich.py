"""Validation and enrichment of read records: every record is either a staged row or a quarantine entry."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from sqlalchemy import Connection, text

from strataflow.ingest.enrich import STAGE_COLUMNS, ChunkOptions, prepare_chunk
from strataflow.ingest.staging import write_chunk

GOOD = {
    "conversation_id": "c1",
    "subject_id": "u1",
    "source_message_id": "m1",
    "role": "user",
    "content": "hello there",
    "created_at": "2026-11-01T10:00:00",
}
OPTIONS = ChunkOptions(
    default_source="file.jsonl",
    tz=ZoneInfo("Asia/Shanghai"),
    max_content_chars=50,
    retention_days=30,
    namespace="ns",
)


@pytest.mark.parametrize(
    ("change", "field", "reason"),
    [
        ({"role": "wizard"}, "role", "unknown_role"),  # not one of user/assistant/system/tool
        ({"content": "   "}, "content", "empty_content"),  # whitespace only
        ({"content": "x" * 51}, "content", "content_too_long"),  # over max_content_chars
        ({"content": 42}, "content", "wrong_type"),  # a number is not text
        ({"created_at": "not a date"}, "created_at", "bad_timestamp"),
        (
            {"created_at": "0001-01-01T00:00:00"},
            "created_at",
            "bad_timestamp",
        ),  # would need absurd partitions
        ({"subject_id": None}, "subject_id", "wrong_type"),
        ({"metadata": ["not", "an", "object"]}, "metadata", "wrong_type"),
        (
            {"conversation_id": "a\x00b"},
            "conversation_id",
            "nul_character",
        ),  # PostgreSQL text cannot hold NUL
    ],
)
def test_bad_fields_are_quarantined_with_a_reason_naming_the_field(
    change: dict, field: str, reason: str
) -> None:
    chunk = prepare_chunk([(7, None, {**GOOD, **change})], OPTIONS)
    assert chunk.rows == []
    [problem] = chunk.quarantined
    assert (problem["field"], problem["reason"], problem["position"]) == (field, reason, "7")
    assert f"'{field}'" in problem["error"] and problem["error"].startswith("file.jsonl record 7:")


def test_a_missing_field_is_named() -> None:
    record = {key: value for key, value in GOOD.items() if key != "source_message_id"}
    [problem] = prepare_chunk([(1, None, record)], OPTIONS).quarantined
    assert (problem["field"], problem["reason"]) == ("source_message_id", "missing_field")
    assert problem["subject_id"] == "u1"  # known, so forget can find it


def test_namespace_option_wins_and_a_record_without_any_is_quarantined() -> None:
    with_own = {**GOOD, "namespace": "theirs"}
    assert prepare_chunk([(1, None, with_own)], OPTIONS).rows[0][0] == "ns"
    no_option = ChunkOptions("file.jsonl", ZoneInfo("UTC"), 100, 30)
    assert prepare_chunk([(1, None, with_own)], no_option).rows[0][0] == "theirs"
    [problem] = prepare_chunk([(1, None, GOOD)], no_option).quarantined
    assert (problem["field"], problem["reason"]) == ("namespace", "missing_namespace")


def test_source_option_beats_the_record_which_beats_the_file_name() -> None:
    record = {**GOOD, "source": "crm"}
    assert prepare_chunk([(1, None, GOOD)], OPTIONS).rows[0][1] == "file.jsonl"
    assert prepare_chunk([(1, None, record)], OPTIONS).rows[0][1] == "crm"
    forced = ChunkOptions("file.jsonl", ZoneInfo("UTC"), 100, 30, namespace="ns", source="daily")
    assert prepare_chunk([(1, None, record)], forced).rows[0][1] == "daily"


def test_enrichment_adds_language_intent_hash_and_time_zone() -> None:
    chunk = prepare_chunk([(1, None, {**GOOD, "content": "我在杭州做前端开发"})], OPTIONS)
    row = dict(zip(STAGE_COLUMNS, chunk.rows[0], strict=True))
    assert row["lang"] == "zh" and row["intent"] == "statement" and len(row["content_hash"]) == 64
    assert row["event_at"].utcoffset().total_seconds() == 8 * 3600  # naive time read in Asia/Shanghai
    assert "前端" in row["fts_zh"].split()


def test_the_last_duplicate_of_a_key_in_a_chunk_wins() -> None:
    items = [(1, None, {**GOOD, "content": "first"}), (2, None, {**GOOD, "content": "second"})]
    chunk = prepare_chunk(items, OPTIONS)
    assert chunk.duplicates == 1 and [row[7] for row in chunk.rows] == ["second"]


VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=30),
    st.sampled_from(["user", "assistant", "tool", "2026-11-01T10:00:00Z", "2026-13-01", "", " "]),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2),
)
RECORDS = st.dictionaries(
    st.sampled_from([*GOOD, "metadata", "lang", "agent_id", "namespace", "extra"]), VALUES, max_size=10
).map(lambda partial: {**GOOD, **partial} if partial.get("extra") == 1 else partial)
MOSTLY_VALID = st.builds(
    lambda content, created, role: {**GOOD, "content": content, "created_at": created, "role": role},
    st.text(max_size=60),
    st.one_of(st.datetimes(datetime(2026, 1, 1), datetime(2026, 2, 1)), st.text(max_size=25)),
    st.sampled_from(["user", "assistant", "bot"]),
)


@hsettings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(st.one_of(RECORDS, MOSTLY_VALID), min_size=1, max_size=6))
def test_random_records_never_crash_and_each_lands_in_l1_or_quarantine(
    conn: Connection, records: list
) -> None:
    namespace = f"t_{uuid.uuid4().hex[:10]}"
    items: list[tuple[int, Any, Any]] = [
        (i, None, {**r, "source_message_id": f"m{i}"} if "source_message_id" in r else r)
        for i, r in enumerate(records, start=1)
    ]
    options = ChunkOptions("prop.jsonl", ZoneInfo("UTC"), 50, 30, namespace=namespace)
    chunk = prepare_chunk(items, options)
    assert len(chunk.rows) + len(chunk.quarantined) == len(items)  # keys are unique here: no duplicates
    savepoint = conn.begin_nested()
    try:
        counts = write_chunk(conn, chunk, len(items), None, 30)
        stored = conn.execute(
            text("select count(*) from conversation_messages where namespace = :ns"), {"ns": namespace}
        ).scalar()
        quarantined = conn.execute(
            text("select count(*) from quarantine where namespace = :ns"), {"ns": namespace}
        ).scalar()
    finally:
        savepoint.rollback()
    assert (stored, quarantined) == (counts.inserted, counts.quarantined)
    assert stored + quarantined == len(items)


def test_two_chunks_written_in_one_transaction_each_count_only_their_own_rows(conn: Connection) -> None:
    namespace = f"t_{uuid.uuid4().hex[:8]}"
    options = ChunkOptions(**{**OPTIONS.__dict__, "namespace": namespace})
    first = prepare_chunk([(1, None, GOOD)], options)
    second = prepare_chunk([(2, None, {**GOOD, "source_message_id": "m2"})], options)
    counts = [write_chunk(conn, chunk, 1, None, 30) for chunk in (first, second)]
    stored = (
        conn.execute(
            text("select source_message_id from conversation_messages where namespace = :ns order by 1"),
            {"ns": namespace},
        )
        .scalars()
        .all()
    )
    assert [(c.inserted, c.updated, c.skipped) for c in counts] == [(1, 0, 0), (1, 0, 0)]
    assert stored == ["m1", "m2"]
