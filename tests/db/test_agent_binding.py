"""The agent of an agent-bound key, enforced by row-level security (sql/320, issue 36 item 5): a transaction
bound to agent a1 (roles.as_agent) sees a1's own L2 items, shared ones and the namespace's, never b1's
private ones (nor their history), writes no item or message of another agent, and sees only its own and
unassigned L1 messages; an unbound transaction of the same role sees what the namespace policy allows."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import Connection, Engine, text
from sqlalchemy.exc import DBAPIError

from strataflow.db import roles
from strataflow.memory.api import create_memory

INSERT_MESSAGE = text(
    """
    insert into conversation_messages (message_id, namespace, subject_id, agent_id, conversation_id, source,
        source_message_id, role, content, content_hash, event_at, expires_at)
    values (nextval('message_keys_message_id_seq'), :ns, 'subj', :agent, 'conv', 'iso', :mid, 'user',
        :content, 'h', :at, :at + interval '30 days')
    """
)
AT = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture(scope="module")
def bound(engine: Engine) -> dict[str, str]:
    """A namespace with a1's private, b1's private, b1's shared and a namespace item, and messages of a1, b1
    and no agent; an agent role granted it."""
    namespace, role = f"bind_{uuid.uuid4().hex[:8]}", f"t_bind_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        roles.create_role(conn, role, "agent", with_password=False)
        roles.grant(conn, role, namespace)
        for name, agent, shared in (("a1 own", "a1", False), ("b1 secret", "b1", False),
                                    ("b1 shared", "b1", True), ("everyone", None, False)):  # fmt: skip
            create_memory(
                conn, namespace, "subj", "user", name, f"{name} text", agent_id=agent, shared=shared
            )
        conn.execute(text("select ensure_message_partitions(:a, :a)"), {"a": AT})
        for agent in ("a1", "b1", None):
            conn.execute(INSERT_MESSAGE, {"ns": namespace, "agent": agent, "mid": f"m-{agent}", "at": AT,
                                          "content": f"said to {agent}"})  # fmt: skip
    return {"namespace": namespace, "role": role}


@pytest.fixture
def as_a1(engine: Engine, bound: dict[str, str]) -> Iterator[Connection]:
    with engine.connect() as conn, conn.begin():
        roles.as_role(conn, bound["role"])
        roles.as_agent(conn, "a1")
        yield conn


def _names(conn: Connection, namespace: str) -> set[str]:
    rows = conn.execute(text("select name from memory_items where namespace = :ns"), {"ns": namespace})
    return set(rows.scalars())


def test_a_bound_transaction_sees_only_its_agents_items_and_history(
    engine: Engine, as_a1: Connection, bound: dict[str, str]
) -> None:
    namespace = bound["namespace"]
    assert _names(as_a1, namespace) == {"a1 own", "b1 shared", "everyone"}
    history = as_a1.execute(
        text("select distinct name from memory_item_versions where namespace = :ns"), {"ns": namespace}
    )
    assert "b1 secret" not in set(history.scalars())
    with engine.connect() as conn, conn.begin():  # the same role, bound to no agent: the namespace's rows
        roles.as_role(conn, bound["role"])
        assert "b1 secret" in _names(conn, namespace)


def test_a_bound_transaction_sees_its_own_and_unassigned_messages(
    as_a1: Connection, bound: dict[str, str]
) -> None:
    rows = as_a1.execute(
        text("select content from conversation_messages where namespace = :ns"), {"ns": bound["namespace"]}
    )
    assert set(rows.scalars()) == {"said to a1", "said to None"}


@pytest.mark.parametrize(
    "statement",
    [
        "update memory_items set agent_id = 'b1' where namespace = :ns and name = 'a1 own'",
        "insert into memory_items (namespace, subject_id, kind, key, value, statement, valid_from, agent_id)"
        " values (:ns, 'subj', 'user', 'forged', '\"x\"', 'x', now(), 'b1')",
        "insert into conversation_messages (message_id, namespace, subject_id, agent_id, conversation_id,"
        " source, source_message_id, role, content, content_hash, event_at, expires_at)"
        " values (nextval('message_keys_message_id_seq'), :ns, 'subj', 'b1', 'c', 'iso', 'forged', 'user',"
        " 'x', 'h', now(), now() + interval '1 day')",
    ],
    ids=["item moved to b1", "item of b1", "message of b1"],
)
def test_a_bound_transaction_writes_nothing_of_another_agent(
    as_a1: Connection, bound: dict[str, str], statement: str
) -> None:
    with pytest.raises(DBAPIError) as refused:
        as_a1.execute(text(statement), {"ns": bound["namespace"]})
    assert refused.value.orig is not None and refused.value.orig.sqlstate == "42501"  # type: ignore[attr-defined]


def test_b1s_items_cannot_be_changed_or_their_history_written(
    as_a1: Connection, bound: dict[str, str]
) -> None:
    namespace = bound["namespace"]
    with pytest.raises(DBAPIError, match="row-level security"), as_a1.begin_nested():
        as_a1.execute(  # b1's private item is invisible; its shared one is not a1's to write
            text("update memory_items set statement = 'stolen' where namespace = :ns and agent_id = 'b1'"),
            {"ns": namespace},
        )
    with pytest.raises(DBAPIError, match="history of agent"), as_a1.begin_nested():
        as_a1.execute(
            text(
                "select strataflow_record_item_version(i.item_id, 99, 'update', '{}'::jsonb, 's', null, 50,"
                " 1.0, 'active', 'manual', now(), null, false, null, null, null, null, null)"
                " from memory_items as i where i.namespace = :ns and i.name = 'b1 shared'"
            ),
            {"ns": namespace},
        )
