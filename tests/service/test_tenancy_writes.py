"""Online writes inside a window, against the real server (issue 28 item 2): created_at outside [now -
retention, now + 1 day] is 422 naming created_at and makes no partition; in a list, the outside record is
quarantined and the others written; agent roles can neither create partitions nor delete L1 rows; a
re-posted message still rewrites (the old row goes through the owner-run helper); subjects with '/' or
control characters are refused at every write; online writes are durable unless a setting opts out."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError

from strataflow.config import Settings
from tests.fixtures.service import Tenant

PARTITIONS = text("select count(*) from pg_inherits where inhparent = 'conversation_messages'::regclass")


def _message(subject: str, content: str, created_at: datetime | str | None = None) -> dict[str, Any]:
    when = created_at or datetime.now(UTC)
    stamp = when if isinstance(when, str) else when.isoformat()
    return {"conversation_id": "c1", "subject_id": subject, "source_message_id": uuid.uuid4().hex,
            "role": "user", "content": content, "created_at": stamp}  # fmt: skip


def test_created_at_outside_the_window_is_422_and_makes_no_partition(
    api_url: str, engine: Engine, tenants: dict[str, Tenant], subject: str
) -> None:
    alpha = tenants["alpha"].client(api_url)
    assert alpha.post("/v1/messages", json=_message(subject, "a message of today")).status_code == 200
    with engine.connect() as conn:
        before = conn.execute(PARTITIONS).scalar()
    for when in ("2150-01-01T00:00:00Z", "1975-01-01T00:00:00Z", datetime.now(UTC) + timedelta(days=3),
                 datetime.now(UTC) - timedelta(days=45)):  # fmt: skip
        refused = alpha.post("/v1/messages", json=_message(subject, "out of the window", when))
        assert refused.status_code == 422 and refused.json()["error"]["field"] == "created_at", refused.text
    mixed = alpha.post(
        "/v1/messages", json=[_message(subject, "inside"), _message(subject, "far", "2150-01-01")]
    )
    assert mixed.status_code == 422  # 2150-01-01 has no time: refused by the body's type before the window
    mixed = alpha.post(
        "/v1/messages", json=[_message(subject, "inside"), _message(subject, "far", "2150-01-01T00:00:00Z")]
    )
    found = mixed.json()
    assert mixed.status_code == 200 and (found["accepted"], found["quarantined"]) == (1, 1)
    assert found["problems"][0]["field"] == "created_at" and found["problems"][0]["position"] == 1
    with engine.connect() as conn:
        assert conn.execute(PARTITIONS).scalar() == before


def test_one_request_spans_at_most_the_configured_weeks(
    settings: Settings, engine: Engine, namespace: str
) -> None:
    from strataflow.ingest.online import WriteRefused, write_messages

    now = datetime.now(UTC)
    records = [_message("u1", f"week {weeks}", now - timedelta(weeks=weeks)) for weeks in range(4)]
    with engine.begin() as conn:
        with pytest.raises(WriteRefused, match="4 distinct weeks") as refused:
            write_messages(conn, settings.model_copy(update={"api_write_max_weeks": 2}), namespace, records)
        assert refused.value.field == "created_at"
        written = write_messages(conn, settings, namespace, records)
        assert written.accepted == 4 and written.inserted == 4


def test_agent_roles_cannot_make_partitions_or_delete_l1(engine: Engine, tenants: dict[str, Tenant]) -> None:
    role = tenants["alpha"].role
    for statement in (
        "select ensure_message_partitions('2150-01-01', '2150-03-31')",
        "delete from conversation_messages",
        "select ensure_online_message_partitions(array[timestamptz '2150-01-01'])",
    ):
        with engine.connect() as conn, conn.begin():
            conn.execute(text(f"set local role {role}"))
            with pytest.raises(DBAPIError) as refused:
                conn.execute(text(statement))
            assert refused.value.orig.sqlstate in ("42501", "22023"), statement  # type: ignore[union-attr]


def test_a_reposted_message_is_rewritten_by_an_agent_key(
    api_url: str, engine: Engine, tenants: dict[str, Tenant], subject: str
) -> None:
    alpha = tenants["alpha"].client(api_url)
    message = _message(subject, "the first version")
    first = alpha.post("/v1/messages", json=message).json()
    second = alpha.post("/v1/messages", json={**message, "content": "the second version"}).json()
    assert (second["ids"], second["updated"]) == (first["ids"], 1)
    with engine.connect() as conn:
        contents = conn.execute(
            text("select content from conversation_messages where message_id = :id"), {"id": first["ids"][0]}
        ).scalars().all()  # fmt: skip
    assert contents == ["the second version"]


@pytest.mark.parametrize("bad", ["team/alice", "alice\nbob", "tab\there", "nul\x00", "u\u2028"])
def test_subject_ids_with_a_slash_or_control_characters_are_refused_at_every_write(
    api_url: str, tenants: dict[str, Tenant], bad: str
) -> None:
    alpha = tenants["alpha"].client(api_url)
    for path, body in (
        ("/v1/messages", _message(bad, "hello")),
        ("/v1/memories", {"subject": bad, "type": "user", "name": "n", "content": "c"}),
        ("/v1/save_info", {"subject": bad, "user_message": "I am 30 years old."}),
        ("/v1/context", {"subject": bad, "query": "hello"}),
    ):
        refused = alpha.post(path, json=body)
        assert refused.status_code == 422, (path, refused.text)
        assert refused.json()["error"]["field"] in ("subject", "subject_id"), refused.text
    assert alpha.patch("/v1/profiles/a%0Ab/user", json={"content": {"occupation": "x"}}).status_code == 422


def test_online_writes_wait_for_their_wal_flush_unless_opted_out(
    settings: Settings, engine: Engine, namespace: str
) -> None:
    from strataflow.ingest.online import write_messages

    for durable, expected in ((True, "on"), (False, "off")):
        with engine.begin() as conn:
            write_messages(conn, settings.model_copy(update={"api_durable_writes": durable}), namespace,
                           [_message("u1", f"durable {durable}")])  # fmt: skip
            assert conn.execute(text("select current_setting('synchronous_commit')")).scalar() == expected
    assert settings.api_durable_writes is True  # the default
