"""Online writes (strataflow.ingest.online) under an agent role: the batch ingest's validation and rules,
found by context at once, extracted by the nightly flow exactly once."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text

from strataflow.config import Settings
from strataflow.db.roles import as_role
from strataflow.ingest.online import write_messages
from strataflow.retrieval.context import build_context
from tests.fixtures.service import Tenant

SELECT_MESSAGES = text(
    """
    select m.message_id, m.source, m.source_message_id, m.content, m.lang, m.intent, m.embedding is null
    from conversation_messages as m where m.namespace = :ns and m.subject_id = :subject order by m.message_id
    """
)


def _message(subject: str, content: str, **fields: Any) -> dict[str, Any]:
    return {
        "conversation_id": "c1", "subject_id": subject, "source_message_id": uuid.uuid4().hex, "role": "user",
        "content": content, "created_at": datetime.now(UTC).isoformat(), **fields,
    }  # fmt: skip


def _write(engine: Engine, settings: Settings, tenant: Tenant, records: list[dict[str, Any]]) -> Any:
    with engine.begin() as conn:
        as_role(conn, tenant.role)
        return write_messages(conn, settings, tenant.namespace, records)


def test_a_written_message_is_in_l1_at_once_and_a_rewrite_or_repeat_follows_the_ingest_rules(
    engine: Engine, settings: Settings, tenants: dict[str, Tenant], subject: str
) -> None:
    alpha = tenants["alpha"]
    first = _message(subject, "我上个月搬到了里斯本，现在是数据工程师。", namespace="somewhere_else")
    written = _write(engine, settings, alpha, [first])
    assert (written.accepted, written.inserted, written.quarantined, len(written.ids)) == (1, 1, 0, 1)
    again = _write(engine, settings, alpha, [first])
    assert (again.ids, again.inserted, again.unchanged, again.updated) == (written.ids, 0, 1, 0)
    changed = _write(engine, settings, alpha, [dict(first, content="I moved to Porto instead.")])
    assert (changed.ids, changed.updated) == (written.ids, 1)
    with engine.connect() as conn:
        rows = conn.execute(SELECT_MESSAGES, {"ns": alpha.namespace, "subject": subject}).all()
        elsewhere = conn.execute(
            text("select count(*) from message_keys where namespace = 'somewhere_else'")
        ).scalar_one()
    # one message (same id), the record's own namespace ignored, source "api", enriched, not yet embedded
    assert [tuple(row) for row in rows] == [
        (
            written.ids[0],
            "api",
            first["source_message_id"],
            "I moved to Porto instead.",
            "en",
            "statement",
            True,
        )
    ]
    assert elsewhere == 0


def test_invalid_records_are_quarantined_under_the_keys_namespace_and_valid_ones_still_land(
    engine: Engine, settings: Settings, tenants: dict[str, Tenant], subject: str
) -> None:
    alpha = tenants["alpha"]
    good = _message(subject, "Status update: the export parser is done.")
    written = _write(engine, settings, alpha, [dict(good, role="wizard"), good, {"content": "no ids"}])
    assert (written.accepted, written.quarantined, written.inserted) == (1, 2, 1)
    assert [(p.position, p.field, p.reason) for p in written.problems] == [
        (0, "role", "unknown_role"),
        (2, "conversation_id", "missing_field"),
    ]
    with engine.connect() as conn:
        fields = conn.execute(
            text("select field from quarantine where namespace = :ns and subject_id = :s order by 1"),
            {"ns": alpha.namespace, "s": subject},
        ).scalars()
        assert list(fields) == ["role"]  # the record without a subject is quarantined without one


def test_a_message_written_a_moment_ago_is_in_the_context_before_it_is_embedded(
    engine: Engine, settings: Settings, tenants: dict[str, Tenant], subject: str
) -> None:
    alpha, beta = tenants["alpha"], tenants["beta"]
    _write(engine, settings, alpha, [_message(subject, "My daughter starts school in Lisbon in September.")])
    with engine.begin() as conn:
        as_role(conn, alpha.role)
        found = build_context(conn, settings, alpha.namespace, subject, "When does school start in Lisbon?")
        as_role(conn, beta.role)
        hidden = build_context(conn, settings, alpha.namespace, subject, "When does school start in Lisbon?")
    assert "starts school in Lisbon" in found.text
    assert "Lisbon" not in hidden.text and not hidden.pieces  # beta's role cannot read alpha's rows


def test_the_nightly_flow_extracts_api_written_messages_exactly_once(
    prefect_harness: None, engine: Engine, settings: Settings, tenants: dict[str, Tenant], tmp_path: Path
) -> None:
    from flows.nightly import nightly
    from models.params import NightlyParams

    alpha, subject = tenants["alpha"], f"nightly_{uuid.uuid4().hex[:6]}"
    yesterday = (datetime.now(UTC) - timedelta(days=1)).isoformat()
    _write(engine, settings, alpha, [
        _message(subject, "I work as a data engineer at Quintessa.", created_at=yesterday),
        _message(subject, "I live in Lisbon with my wife and two kids.", created_at=yesterday),
    ])  # fmt: skip
    (tmp_path / "inbox").mkdir()
    params = NightlyParams(paths=[str(tmp_path / "inbox")], namespace=alpha.namespace)
    first = nightly(params, return_state=True).result()
    second = nightly(params, return_state=True).result()
    with engine.connect() as conn:
        items = conn.execute(
            text(
                "select key, count(*) from memory_items where namespace = :ns and subject_id = :s group by 1"
            ),
            {"ns": alpha.namespace, "s": subject},
        ).all()
        embedded = conn.execute(
            text("select bool_and(embedding is not null) from conversation_messages where subject_id = :s"),
            {"s": subject},
        ).scalar_one()
    assert first.counts.llm_calls > 0 and first.counts.l2_new > 0
    assert {key for key, _ in items} >= {"company"} and all(count == 1 for _, count in items)
    assert (second.counts.llm_calls, second.counts.l2_new, second.counts.encodes) == (0, 0, 0)
    assert embedded  # the embed step of the night embedded them
