"""Every route of the OpenAPI document and every MCP tool, called with a key bound to agent b1 that names
agent a1 wherever a request can name an agent (issue 36 item 5): none shows a1's private entry or a1's L1
message, none changes them, and none fails with a server error: a 501 only where the document says a mem0
platform feature is not served (its tag), naming that feature. The database enforces the binding
(sql/320), so a route that forgot Caller.agent_for would still pass this walk."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy import Engine

from strataflow.db import roles
from strataflow.service import keys
from strataflow.service.routes.mem0_not_served import NOT_SERVED_ROUTES


@pytest.fixture(scope="module")
def pair(engine: Engine) -> dict[str, str]:
    role, namespace = f"t_walk_{uuid.uuid4().hex[:8]}", f"walk_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        roles.create_role(conn, role, "agent", with_password=False)
        roles.grant(conn, role, namespace)
        a1 = keys.create_key(conn, f"{role}-a1", role, agent_id="a1")[0]
        b1 = keys.create_key(conn, f"{role}-b1", role, agent_id="b1")[0]
    return {"a1": a1, "b1": b1}


def _values(subject: str, word: str, pid: int) -> dict[str, Any]:
    """A value for each field or parameter name a route takes; agents are always a1 (not the key's)."""
    return {
        "subject": subject, "user_id": subject, "query": word, "agent": "a1", "agent_id": "a1",
        "item_id": pid, "memory_id": str(pid), "event_id": str(uuid.uuid4()), "type": "user", "name": "walk",
        "content": f"overwritten by b1 {word}", "text": f"overwritten by b1 {word}", "doc_type": "user",
        "user_message": f"I live in Oslo ({word})", "status": "archived", "entity_type": "user",
        "messages": [{"role": "user", "content": f"hello {word}"}], "infer": False,
        "ops": [{"op": "search", "namespace": [], "query": word}], "filters": {"agent_id": "a1"},
        "entity_id": subject, "rest": "walk",
    }  # fmt: skip


def _body(schema: dict[str, Any], doc: dict[str, Any], values: dict[str, Any]) -> Any:
    while "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    if "properties" not in schema:  # POST /v1/messages: one canonical message
        now = datetime.now(UTC).replace(tzinfo=None).isoformat(timespec="seconds")
        return {"conversation_id": "walk", "subject_id": values["subject"], "source_message_id": "walk-1",
                "role": "user", "content": values["content"], "created_at": now,
                "agent_id": "a1"}  # fmt: skip
    return {name: values[name] for name in schema["properties"] if name in values}


def test_no_route_shows_or_changes_another_agents_rows(api_url: str, pair: dict[str, str]) -> None:
    subject, word = f"walk_{uuid.uuid4().hex[:6]}", f"okapi{uuid.uuid4().hex[:6]}"
    a1 = httpx.Client(base_url=api_url, headers={"Authorization": f"Bearer {pair['a1']}"}, timeout=120)
    secret = f"PRIVATE-A1 {word}"
    entry = a1.post(
        "/v1/memories", json={"subject": subject, "type": "user", "name": "vault", "content": secret}
    )
    assert entry.status_code == 201, entry.text
    pid = entry.json()["id"]
    now = datetime.now(UTC).replace(tzinfo=None).isoformat(timespec="seconds")
    said = a1.post("/v1/messages", json={"conversation_id": "c-a1", "subject_id": subject, "role": "user",
                                         "source_message_id": f"a1-{word}", "created_at": now,
                                         "content": f"L1-A1 my locker code is {word}"})  # fmt: skip
    assert said.status_code == 200 and said.json()["inserted"] == 1, said.text
    assert "L1-A1" in a1.get("/v1/context", params={"subject": subject, "query": f"locker code {word}"}).text

    doc = a1.get("/openapi.json").json()
    values = _values(subject, word, pid)
    headers = {"Authorization": f"Bearer {pair['b1']}", "Content-Type": "application/json"}
    b1 = httpx.Client(base_url=api_url, timeout=120, headers=headers)
    walked, unserved = [], []
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            params = {p["name"]: values[p["name"]] for p in operation.get("parameters", [])
                      if p["in"] == "query" and p["name"] in values}  # fmt: skip
            url = path.format(**{p["name"]: values[p["name"]] for p in operation.get("parameters", [])
                                 if p["in"] == "path"})  # fmt: skip
            schema = (
                operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
            )
            body = None if schema is None else json.dumps(_body(schema, doc, values))
            answer = b1.request(method.upper(), url, params=params, content=body)
            walked.append(f"{method.upper()} {path}")
            assert answer.status_code < 500, f"{method.upper()} {path}: {answer.status_code} {answer.text}"
            for marker in ("PRIVATE-A1", "L1-A1"):
                assert marker not in answer.text, f"{method.upper()} {path} showed a1's {marker} to b1"
    assert len(walked) >= 30, walked
    # mem0 platform paths strataflow does not serve: not in the document, each a 501 naming the feature
    for path, methods, _ in NOT_SERVED_ROUTES:
        url = "/mem0" + path.replace("{entity_id}", subject).replace("{rest:path}", "walk")
        assert "/mem0" + path.replace(":path", "") not in doc["paths"], path
        for method in methods:
            answer = b1.request(method, url, content="{}")
            unserved.append(f"{method} {path}")
            refused = answer.json()["error"]
            assert answer.status_code == 501 and "not served" in refused["message"], answer.text
    assert len(unserved) == sum(len(methods) for _, methods, _ in NOT_SERVED_ROUTES), unserved
    kept = a1.get(f"/v1/memories/{pid}").json()
    assert kept["content"] == secret and kept["status"] == "active" and kept["agent"] == "a1"
    assert "L1-A1" in a1.get("/v1/context", params={"subject": subject, "query": f"locker code {word}"}).text

    async def tools() -> list[tuple[str, bool, str]]:
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {pair['b1']}"}, timeout=120) as http:
            async with streamable_http_client(f"{api_url}/mcp", http_client=http) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    answers = []
                    for tool in (await session.list_tools()).tools:
                        arguments = {name: values[name] for name in tool.input_schema.get("properties", {})
                                     if name in values}  # fmt: skip
                        arguments.update(
                            {"id": pid} if "id" in tool.input_schema.get("properties", {}) else {}
                        )
                        result = await session.call_tool(tool.name, arguments)
                        text = " ".join(getattr(c, "text", "") for c in result.content)
                        answers.append((tool.name, bool(result.is_error), text))
                    return answers

    answers = asyncio.run(tools())
    assert len(answers) >= 9, answers
    for name, _, text in answers:
        assert "PRIVATE-A1" not in text and "L1-A1" not in text, f"tool {name} showed a1's rows to b1"
        assert "internal error" not in text, f"tool {name}: {text}"
    kept = a1.get(f"/v1/memories/{pid}").json()
    assert kept["content"] == secret and kept["status"] == "active"
