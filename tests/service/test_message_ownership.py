"""A message belongs to the agent that wrote it (issue 46, R8): an agent-bound key posting again under
another agent's message id used to re-key it and replace its text. Now the database refuses (sql/442: the
key records its agent, and a transaction bound to an agent changes only its own keys): 403, the message
untouched; its own agent may still rewrite it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import httpx
import pytest
from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError

from strataflow.db import roles
from strataflow.service import keys

SELECT_TEXT = text(
    "select m.content, m.agent_id, k.agent_id from conversation_messages as m "
    "join message_keys as k using (message_id) where m.namespace = :ns and m.source_message_id = :id"
)

INSERT_KEY = text(
    "insert into message_keys (namespace, source, source_message_id, subject_id, conversation_id, event_at, "
    "content_hash, agent_id) values (:ns, 'api', :id, 'own_u', 'c', now(), 'h', 'a1')"
)


@pytest.fixture(scope="module")
def agents(engine: Engine) -> dict[str, str]:
    role, namespace = f"t_own_{uuid.uuid4().hex[:8]}", f"own_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        roles.create_role(conn, role, "agent", with_password=False)
        roles.grant(conn, role, namespace)
        made = {
            agent: keys.create_key(conn, f"{role}-{agent}", role, agent_id=agent)[0] for agent in ("a1", "b1")
        }
    return {**made, "namespace": namespace}


def _post(api_url: str, key: str, message_id: str, content: str) -> httpx.Response:
    now = datetime.now(UTC).replace(tzinfo=None).isoformat(timespec="seconds")
    body = {"conversation_id": "c-own", "subject_id": "own_u", "source_message_id": message_id,
            "role": "user", "content": content, "created_at": now}  # fmt: skip
    return httpx.post(
        f"{api_url}/v1/messages", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=60
    )


def test_another_agent_cannot_rewrite_a_message_under_its_id(
    api_url: str, engine: Engine, agents: dict[str, str]
) -> None:
    message_id, ns = f"m-{uuid.uuid4().hex[:8]}", {"ns": agents["namespace"]}
    first = _post(api_url, agents["a1"], message_id, "my locker code is 4711")
    assert first.status_code == 200 and first.json()["inserted"] == 1, first.text
    taken = _post(api_url, agents["b1"], message_id, "my locker code is 0000")
    assert taken.status_code == 403, taken.text
    with engine.connect() as conn:
        assert conn.execute(SELECT_TEXT, {**ns, "id": message_id}).all() == [
            ("my locker code is 4711", "a1", "a1")
        ]
    again = _post(api_url, agents["a1"], message_id, "my locker code is 4712")  # its own agent may
    assert again.status_code == 200 and again.json()["updated"] == 1, again.text
    with engine.connect() as conn:
        assert conn.execute(SELECT_TEXT, {**ns, "id": message_id}).all() == [
            ("my locker code is 4712", "a1", "a1")
        ]


def test_the_database_refuses_a_bound_transaction_re_keying_another_agents_message(
    engine: Engine, agents: dict[str, str]
) -> None:
    message_id = f"m-{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        conn.execute(INSERT_KEY, {"ns": agents["namespace"], "id": message_id})
    with pytest.raises(DBAPIError, match="not its own"), engine.begin() as conn:
        roles.as_agent(conn, "b1")
        conn.execute(
            text("update message_keys set content_hash = 'x' where source_message_id = :id"),
            {"id": message_id},
        )
