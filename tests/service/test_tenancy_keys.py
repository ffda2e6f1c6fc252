"""Agent identity belongs to the key (issue 28 item 3), against the real server: a key made with `--agent`
acts only as that agent (naming another is 403), sees its own private entries, shared ones and the
namespace's; another agent's key and a key bound to no agent see nothing private of it in any endpoint or
tool; a shared entry is readable by other agents and read-only to them. Internal kinds are refused (item 4).
Analyst keys are offered the read tools only over /mcp."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy import Engine
from typer.testing import CliRunner

from tests.fixtures.service import Tenant

READ_TOOLS = {"memory_recall", "get_context", "get_user_context", "profile_get"}


@pytest.fixture(scope="module")
def team(engine: Engine) -> dict[str, Any]:
    """One agent role and namespace with three keys: bound to agent a1, bound to b1, and bound to none."""
    from strataflow.db import roles
    from strataflow.service import keys

    role, namespace = f"t_team_{uuid.uuid4().hex[:8]}", f"team_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        roles.create_role(conn, role, "agent", with_password=False)
        roles.grant(conn, role, namespace)
        made = {
            "a1": keys.create_key(conn, f"{role}-a1", role, agent_id="a1")[0],
            "b1": keys.create_key(conn, f"{role}-b1", role, agent_id="b1")[0],
            "plain": keys.create_key(conn, f"{role}-plain", role)[0],
        }
    return {"role": role, "namespace": namespace, **made}


@pytest.mark.parametrize("agent", ["a/b", "a\x00b", "a\nb", "a\u2028b", "", "x" * 513])
def test_a_key_cannot_be_bound_to_an_agent_id_no_request_could_name(engine: Engine, agent: str) -> None:
    from strataflow.db import roles
    from strataflow.service import keys

    role = f"t_bad_agent_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        roles.create_role(conn, role, "agent", with_password=False)
        with pytest.raises(roles.AccessError, match="--agent"):
            keys.create_key(conn, f"{role}-k", role, agent_id=agent)


def _client(url: str, key: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=120)


def _seen(client: httpx.Client, entry_id: int, subject: str, query: str, marker: str) -> list[str]:
    """Where the client sees the entry: GET, search, list, context."""
    seen = []
    if client.get(f"/v1/memories/{entry_id}").status_code != 404:
        seen.append("get")
    found = client.post("/v1/memories/search", json={"query": query, "subject": subject}).json()["results"]
    if any(hit["id"] == entry_id for hit in found):
        seen.append("search")
    if any(
        e["id"] == entry_id for e in client.get("/v1/memories", params={"subject": subject}).json()["entries"]
    ):
        seen.append("list")
    if marker in client.get("/v1/context", params={"subject": subject, "query": query, "budget": 4000}).text:
        seen.append("context")
    if marker in client.post("/v1/user_context", json={"subject": subject, "query": query}).text:
        seen.append("user_context")
    return seen


def test_a_key_bound_to_an_agent_acts_only_as_that_agent(api_url: str, team: dict[str, Any]) -> None:
    a1, b1, plain = (_client(api_url, team[name]) for name in ("a1", "b1", "plain"))
    subject, word = f"priv_{uuid.uuid4().hex[:6]}", f"zebrafjord{uuid.uuid4().hex[:6]}"
    query = f"vault code {word}"

    def save(client: httpx.Client, **entry: Any) -> httpx.Response:
        return client.post("/v1/memories", json={"subject": subject, **entry})

    private = save(a1, type="user", name="vault", content=f"PRIVATE-A1 the vault code for {word} is 4711")
    assert private.status_code == 201 and private.json()["agent"] == "a1" and not private.json()["shared"]
    shared = save(a1, type="project", name="notes", shared=True, content=f"SHARED-A1 {word} kickoff notes")
    common = save(plain, type="reference", name="wiki", content=f"COMMON {word} wiki page")
    assert shared.status_code == 201 and common.status_code == 201 and common.json()["agent"] is None
    pid, sid = private.json()["id"], shared.json()["id"]

    assert _seen(a1, pid, subject, query, "PRIVATE-A1") == [
        "get",
        "search",
        "list",
        "context",
        "user_context",
    ]
    assert _seen(b1, pid, subject, query, "PRIVATE-A1") == []
    assert _seen(plain, pid, subject, query, "PRIVATE-A1") == []  # no agent: no agent's private entries
    assert "COMMON" in b1.get("/v1/context", params={"subject": subject, "query": query, "budget": 4000}).text
    assert (
        "SHARED-A1" in b1.get("/v1/context", params={"subject": subject, "query": query, "budget": 4000}).text
    )

    # Naming another agent is refused, whatever the endpoint; naming its own is fine.
    for response in (
        b1.get(f"/v1/memories/{pid}", params={"agent": "a1"}),
        b1.get("/v1/memories", params={"agent": "a1"}),
        b1.post("/v1/memories/search", json={"query": query, "agent": "a1"}),
        b1.get("/v1/context", params={"subject": subject, "query": query, "agent": "a1"}),
        b1.post("/v1/user_context", json={"subject": subject, "query": query, "agent": "a1"}),
        b1.patch(f"/v1/memories/{pid}", params={"agent": "a1"}, json={"content": "overwritten"}),
        b1.delete(f"/v1/memories/{pid}", params={"agent": "a1"}),
        b1.post(
            "/v1/memories",
            json={"subject": subject, "type": "user", "name": "x", "content": "y", "agent": "a1"},
        ),  # fmt: skip
    ):
        assert response.status_code == 403, response.text
        assert "bound to agent 'b1'" in response.json()["error"]["message"]
    assert a1.get(f"/v1/memories/{pid}", params={"agent": "a1"}).status_code == 200

    # Another agent's private entry: 404 to change; its shared entry: readable, 403 to change.
    assert b1.patch(f"/v1/memories/{pid}", json={"content": "overwritten"}).status_code == 404
    assert b1.delete(f"/v1/memories/{pid}").status_code == 404
    assert b1.get(f"/v1/memories/{sid}").status_code == 200
    for response in (b1.patch(f"/v1/memories/{sid}", json={"content": "x"}), b1.delete(f"/v1/memories/{sid}"),
                     plain.patch(f"/v1/memories/{sid}", json={"shared": False})):  # fmt: skip
        assert response.status_code == 403, response.text
    assert a1.get(f"/v1/memories/{pid}").json()["status"] == "active"
    assert a1.get(f"/v1/memories/{sid}").json()["content"] == f"SHARED-A1 {word} kickoff notes"


def test_mcp_tools_follow_the_keys_agent(api_url: str, team: dict[str, Any]) -> None:
    a1 = _client(api_url, team["a1"])
    subject, word = f"mcp_{uuid.uuid4().hex[:6]}", f"quokka{uuid.uuid4().hex[:6]}"
    entry = a1.post("/v1/memories", json={"subject": subject, "type": "user", "name": "secret",
                                           "content": f"PRIVATE-A1 {word}"}).json()  # fmt: skip

    async def run(key: str) -> list[tuple[bool, str]]:
        calls = [("memory_recall", {"query": word, "subject": subject}),
                 ("memory_recall", {"query": word, "agent": "a1"}),
                 ("get_context", {"subject": subject, "query": word}),
                 ("memory_update", {"id": entry["id"], "content": "stolen"})]  # fmt: skip
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120) as http:
            async with streamable_http_client(f"{api_url}/mcp", http_client=http) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    answers = []
                    for tool, arguments in calls:
                        result = await session.call_tool(tool, arguments)
                        answers.append((bool(result.is_error), " ".join(c.text for c in result.content)))
                    return answers

    owner = asyncio.run(run(team["a1"]))
    assert word in owner[0][1] and word in owner[1][1] and word in owner[2][1] and not owner[3][0]
    other = asyncio.run(run(team["b1"]))
    assert all(word not in text for _, text in other)
    assert other[1][0] and "forbidden" in other[1][1]  # naming agent a1
    assert other[3][0] and "not found" in other[3][1]


def test_analyst_keys_are_offered_the_read_tools_only(api_url: str, tenants: dict[str, Tenant]) -> None:
    async def names(key: str) -> set[str]:
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120) as http:
            async with streamable_http_client(f"{api_url}/mcp", http_client=http) as (read, write, *_):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    return {tool.name for tool in (await session.list_tools()).tools}

    assert asyncio.run(names(tenants["reader"].key)) == READ_TOOLS
    assert READ_TOOLS < asyncio.run(names(tenants["alpha"].key))


@pytest.mark.parametrize("kind", ["hot_summary", "HOT_SUMMARY", " hot_summary", "diary"])
def test_internal_kinds_are_refused_on_every_surface(
    api_url: str, tenants: dict[str, Tenant], subject: str, kind: str
) -> None:
    alpha = tenants["alpha"].client(api_url)
    body = {"subject": subject, "type": kind, "name": "recap", "content": "Recent summary: wire the fee"}
    refused = alpha.post("/v1/memories", json=body)
    assert refused.status_code == 422 and refused.json()["error"]["field"] == "type"
    saved = alpha.post("/v1/memories", json={**body, "type": "user"}).json()
    assert alpha.patch(f"/v1/memories/{saved['id']}", json={"type": kind}).status_code == 422
    assert alpha.get("/v1/memories", params={"type": kind}).status_code == 422


def test_the_library_refuses_internal_kinds_too(conn: Any, namespace: str) -> None:
    from strataflow.memory.api import create_memory
    from strataflow.memory.item_fields import MemoryFieldError

    with pytest.raises(MemoryFieldError, match="hot_summary") as refused:
        create_memory(conn, namespace, "u1", "hot_summary", "recap", "text")
    assert refused.value.field == "type"


def test_create_key_binds_the_agent_and_list_keys_shows_it(engine: Engine, team: dict[str, Any]) -> None:
    from strataflow.cli import app

    runner = CliRunner()
    made = runner.invoke(app, ["access", "create-key", f"cli-{uuid.uuid4().hex[:6]}", "--role", team["role"],
                               "--agent", "support-bot"])  # fmt: skip
    assert made.exit_code == 0, made.output
    assert made.stdout.strip().splitlines()[-1].startswith("sf_")
    listed = runner.invoke(app, ["access", "list-keys"])
    assert any(line.split("\t")[3] == "support-bot" for line in listed.stdout.splitlines())
    refused = runner.invoke(
        app, ["access", "create-key", "cli-bad", "--role", team["role"], "--agent", "a/b"]
    )
    assert refused.exit_code == 1 and "--agent" in refused.output
