"""The fast path (models.messages.canonical_fields) gives the model's answer, or leaves the record to it."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from pydantic import ValidationError

from models.common import Role
from models.messages import MessageRecord, canonical_fields, record_fields, validation_context
from strataflow.ingest.enrich import ChunkOptions, prepare_chunk

TZ = ZoneInfo("America/New_York")  # a zone with DST: naive times take its offset of that date
LIMIT = 50
OPTIONS = ChunkOptions(default_source="f.jsonl", tz=TZ, max_content_chars=LIMIT, retention_days=30)


def base(**fields: Any) -> dict[str, Any]:
    record = {
        "conversation_id": "c1",
        "subject_id": "alice",
        "source_message_id": "m1",
        "role": "user",
        "content": "We shipped it.",
        "created_at": "2026-11-02T09:00:00Z",
    }
    record.update(fields)
    return {k: v for k, v in record.items() if v is not MISSING}


MISSING = object()


def model_fields(value: dict[str, Any]) -> tuple[Any, ...] | None:
    try:
        return record_fields(MessageRecord.model_validate(value, context=validation_context(TZ, LIMIT)))
    except ValidationError:
        return None


def assert_same_answer(value: dict[str, Any]) -> None:
    """The fast path declines, or returns exactly the model's fields (times with the same offset)."""
    fast = canonical_fields(value, TZ, LIMIT)
    if fast is None:
        return
    model = model_fields(value)
    assert model is not None, f"the fast path accepted what the model refuses: {value!r}"
    assert fast == model
    assert fast[5].isoformat() == model[5].isoformat() and fast[5].utcoffset() == model[5].utcoffset()
    assert type(fast[3]) is Role and all(type(f) is str for f in fast[:3])


@pytest.mark.parametrize(
    "value",
    [
        base(),  # the canonical record
        base(created_at="2026-11-02T09:00:00"),  # naive: read in TZ (EST that day)
        base(created_at="2026-07-02 09:00:00.25"),  # naive, space, fraction, EDT
        base(created_at="2026-11-01T01:30:00"),  # ambiguous local time: fold 0 both ways
        base(created_at="2026-03-08T02:30:00"),  # a local time that does not exist
        base(created_at="2026-11-02T09:00:00+08:00"),
        base(created_at="2026-11-02T09:00:00-00:00"),
        base(created_at="2200-12-31T23:59:59.999999+23:59"),
        base(created_at="1970-01-01T00:00:00"),
        base(created_at=datetime(2026, 11, 2, 9, tzinfo=UTC)),  # readers of Parquet, SQL and LoCoMo
        base(created_at=datetime(2026, 11, 2, 9)),
        base(created_at=datetime(2026, 11, 2, 9, tzinfo=timezone(timedelta(hours=-3)))),
        base(source_message_id=12, conversation_id=0),  # ints become text, as the model does
        base(namespace="ns", source="src", agent_id="bot", lang="zh"),
        base(namespace="", source="", agent_id="", lang=""),  # empty optionals are kept as ""
        base(namespace=None, metadata=None),
        base(metadata={"speaker": "Bob", "n": [1, 2.5, None], "\x00key": "x"}),
        base(metadata={}),
        base(content="x" * LIMIT, role="tool"),
        base(content="tab\tnew\nline back\\slash \u2028 我们"),
        base(extra_field="ignored", updated_at="2026-01-01"),
    ],
)
def test_the_fast_path_accepts_canonical_records_with_the_models_result(value: dict[str, Any]) -> None:
    assert canonical_fields(value, TZ, LIMIT) is not None
    assert_same_answer(value)


@pytest.mark.parametrize(
    "value",
    [
        # valid, but in a form the fast path leaves to pydantic
        base(created_at="2026-11-02"),
        base(created_at=1793000000),
        base(created_at="1793000000"),
        base(created_at="2026-11-02T09:00:00.1234567Z"),
        base(created_at="2026-11-02T09:00:00z"),
        base(created_at="2026-11-02t09:00:00"),
        base(created_at="2026-11-02_09:00:00"),
        base(created_at="2026-11-02T09:00:00+0800"),
        base(source_message_id=1.5),
        base(namespace=7, lang=3),
        base(metadata={1: "int key"}),
        base(role=Role.user),
        # invalid: the model's error is quarantined
        base(subject_id=MISSING),
        base(role="wizard"),
        base(role="User"),
        base(role=None),
        base(role=["user"]),
        base(content=""),
        base(content="   \n"),
        base(content="a\x00b"),
        base(content="x" * (LIMIT + 1)),
        base(content=7),
        base(content=None),
        base(created_at="yesterday"),
        base(created_at="2026-02-30T09:00:00Z"),
        base(created_at="2026-11-02T24:00:00Z"),
        base(created_at="2026-11-02T09:00:60Z"),
        base(created_at="2026-11-02T09:00:00+24:00"),
        base(created_at="1969-12-31T23:59:59Z"),
        base(created_at="2201-01-01T00:00:00"),
        base(created_at=datetime(1900, 1, 1)),
        base(created_at=None),
        base(source_message_id=""),
        base(source_message_id=True),
        base(source_message_id="x" * 513),
        base(source_message_id=10**600),
        base(conversation_id="c\x00"),
        base(namespace="n" * 513),
        base(agent_id="a\x00"),
        base(lang="l" * 17),
        base(source=["list"]),
        base(metadata="text"),
        base(metadata=["list"]),
    ],
)
def test_every_other_record_goes_to_the_model_and_lands_or_is_quarantined_the_same(
    value: dict[str, Any],
) -> None:
    assert canonical_fields(value, TZ, LIMIT) is None
    items = [(1, None, value)]
    fast, slow = prepare_chunk(items, OPTIONS), prepare_chunk(items, OPTIONS, fast=False)
    assert (fast.rows, fast.payload, fast.quarantined) == (slow.rows, slow.payload, slow.quarantined)
    assert len(fast.rows) + len(fast.quarantined) == 1
    if fast.quarantined:  # the sentence names the record and the field
        problem = fast.quarantined[0]
        assert problem["error"].startswith("f.jsonl record 1: field '") and problem["field"]


VARIANTS: dict[str, list[Any]] = {
    "conversation_id": ["c1", 5, "", "c\x00", "c" * 512, "c" * 513, None, MISSING, True, 1.0],
    "subject_id": ["s", 0, -3, "ü", MISSING, []],
    "source_message_id": ["m1", "m\t1", 2**70, "", MISSING],
    "role": ["user", "assistant", "system", "tool", "USER", "", None, MISSING, 1],
    "content": ["hi", "我们决定用 Postgres", " ", "", "a\x00", "x" * LIMIT, "x" * (LIMIT + 1), 3, MISSING],
    "created_at": [
        "2026-11-02T09:00:00Z",
        "2026-11-02 09:00:00",
        "2026-11-02T09:00:00.5+05:30",
        "2026-11-02",
        "2026-13-02T09:00:00",
        "0000-01-01T00:00:00",
        "2026-11-02T09:00",
        1.5e9,
        datetime(2026, 1, 1, 12),
        datetime(1969, 1, 1, tzinfo=UTC),
        MISSING,
    ],
    "namespace": [MISSING, None, "", "ns", 4, "n\x00"],
    "lang": [MISSING, None, "en", "x" * 16, "x" * 17],
    "metadata": [MISSING, None, {}, {"a": 1}, {"a": "\x00"}, {2: "b"}, "{}", [1]],
}


def test_the_fast_path_and_the_model_agree_on_thousands_of_mixed_records() -> None:
    rng = random.Random(17)
    fields = list(VARIANTS)
    combos = [
        dict(zip(fields, c, strict=True)) for c in itertools.product(*(VARIANTS[f][:2] for f in fields))
    ]
    combos += [{f: rng.choice(VARIANTS[f]) for f in fields} for _ in range(4000)]
    records = [{k: v for k, v in combo.items() if v is not MISSING} for combo in combos]
    for record in records:
        assert_same_answer(record)
    items = [(i, None, record) for i, record in enumerate(records, start=1)]
    options = ChunkOptions(default_source="f.jsonl", tz=TZ, max_content_chars=LIMIT, retention_days=30)
    fast, slow = prepare_chunk(items, options), prepare_chunk(items, options, fast=False)
    assert (fast.rows, fast.payload, fast.quarantined) == (slow.rows, slow.payload, slow.quarantined)
    accepted = sum(canonical_fields(r, TZ, LIMIT) is not None for r in records)
    assert 0 < accepted < len(records) and fast.quarantined and fast.rows  # every branch was taken
