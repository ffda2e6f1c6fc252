"""The MCP tools through the official SDK's own clients: `strataflow mcp` over stdio, and /mcp over HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.fixtures.service import Tenant

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {
    "memory_save", "memory_recall", "memory_update", "memory_delete", "save_user_memory", "get_user_context",
    "get_context", "profile_get", "profile_patch",
}  # fmt: skip
Session = Callable[[ClientSession], Awaitable[Any]]


def _stdio(env: dict[str, str] | None, work: Session) -> Any:
    # `python -m strataflow.cli mcp` from the repository root runs this checkout's code.
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "strataflow.cli", "mcp"], env=env, cwd=ROOT
    )

    async def run() -> Any:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await work(session)

    return asyncio.run(run())


async def _call(session: ClientSession, tool: str, **arguments: Any) -> tuple[bool, str]:
    result = await session.call_tool(tool, arguments)
    return bool(result.is_error), " ".join(getattr(block, "text", "") for block in result.content)


# An MCP client as a user configures it: the SDK's stdio client starts the server with HOME, PATH and a few
# more variables, plus the configuration's `env` block (the key and the home), the server's only settings.
CLIENT = """
import asyncio, json, os, sys
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

async def call(session, tool, **arguments):
    result = await session.call_tool(tool, arguments)
    return [bool(result.is_error), " ".join(getattr(block, "text", "") for block in result.content)]

async def main(subject):
    env = {name: os.environ[name] for name in ("STRATAFLOW_API_KEY", "STRATAFLOW_HOME")}
    params = StdioServerParameters(command=sys.executable, args=["-m", "strataflow.cli", "mcp"], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = [t.model_dump(mode="json", by_alias=False) for t in (await session.list_tools()).tools]
        saved = await call(session, "memory_save", subject=subject, type="feedback", name="用户偏好-简洁风格",
                           content="prefers short answers in plain text", description="answer style")
        entry = json.loads(saved[1])
        out = {"tools": tools, "entry": entry,
               "recalled": await call(session, "memory_recall", query="short answers plain text",
                                      subject=subject),
               "updated": await call(session, "memory_update", id=entry["id"],
                                     content="prefers very short answers"),
               "duplicate": await call(session, "memory_save", subject=subject, type="user",
                                       name="用户偏好-简洁风格", content="again"),
               "deleted": await call(session, "memory_delete", id=entry["id"]),
               "missing": await call(session, "memory_update", id=entry["id"], content="x")}
    print(json.dumps(out, ensure_ascii=False))

asyncio.run(main(sys.argv[1]))
"""


def test_stdio_tools_save_recall_update_and_delete_with_the_key_from_the_env_block(
    tenants: dict[str, Tenant], subject: str
) -> None:
    env = {**os.environ, "STRATAFLOW_API_KEY": tenants["alpha"].key}
    client = subprocess.run(
        [sys.executable, "-c", CLIENT, subject],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert client.returncode == 0, client.stderr[-3000:]
    found = json.loads(client.stdout.strip().splitlines()[-1])
    tools = {tool["name"]: tool for tool in found["tools"]}
    assert set(tools) == TOOLS
    recall = tools["memory_recall"]["input_schema"]
    assert recall["required"] == ["query"] and recall["properties"]["limit"]["default"] == 5
    assert all(len(tool["description"] or "") > 40 for tool in tools.values())
    entry = found["entry"]
    assert (entry["name"], entry["type"]) == ("用户偏好-简洁风格", "feedback")
    assert not found["recalled"][0]
    assert re.fullmatch(
        rf'\[feedback\] "用户偏好-简洁风格" \(id {entry["id"]}, subject "{subject}", score [0-9.e-]+\)\n'
        '"prefers short answers in plain text"',
        found["recalled"][1],
    ), found["recalled"][1]
    assert not found["updated"][0] and json.loads(found["updated"][1])["version"] == 2
    assert found["duplicate"][0] and "memory_update" in found["duplicate"][1]  # the error says what to do
    assert json.loads(found["deleted"][1])["status"] == "deleted"
    assert found["missing"][0] and "memory_recall" in found["missing"][1]


def test_stdio_tools_of_another_namespace_see_nothing(
    api_url: str, tenants: dict[str, Tenant], subject: str
) -> None:
    alpha = tenants["alpha"].client(api_url)
    entry = alpha.post(
        "/v1/memories", json={"subject": subject, "type": "project", "name": "codename", "content": "Bluefin"}
    ).json()
    alpha.patch(f"/v1/profiles/{subject}/user", json={"content": {"occupation": "Bluefin lead"}})
    env = {"PYTHONPATH": str(ROOT), "STRATAFLOW_HOME": os.environ["STRATAFLOW_HOME"],
           "STRATAFLOW_API_KEY": tenants["beta"].key}  # fmt: skip

    async def work(session: ClientSession) -> list[tuple[bool, str]]:
        return [
            await _call(session, "memory_recall", query="Bluefin codename"),
            await _call(session, "get_context", subject=subject, query="What is Bluefin?"),
            await _call(session, "profile_get", subject=subject),
            await _call(session, "memory_update", id=entry["id"], content="stolen"),
            await _call(session, "memory_delete", id=entry["id"]),
        ]

    answers = _stdio(env, work)
    assert all("Bluefin" not in text for _, text in answers), answers
    assert [failed for failed, _ in answers] == [False, False, False, True, True]
    assert alpha.get(f"/v1/memories/{entry['id']}").json()["content"] == "Bluefin"


def test_the_http_mcp_endpoint_needs_a_key_and_serves_the_same_tools(
    api_url: str, tenants: dict[str, Tenant], subject: str
) -> None:
    refused = httpx.post(f"{api_url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    assert refused.headers["www-authenticate"].lower().startswith("bearer")
    alpha = tenants["alpha"].client(api_url)
    alpha.post(
        "/v1/memories",
        json={
            "subject": subject,
            "type": "reference",
            "name": "wiki",
            "content": "The wiki is at wiki.example",
        },
    )

    async def run(
        key: str, calls: list[tuple[str, dict[str, Any]]]
    ) -> tuple[set[str], list[tuple[bool, str]]]:
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(headers=headers, timeout=120) as http:
            async with streamable_http_client(f"{api_url}/mcp", http_client=http) as streams:
                async with ClientSession(streams[0], streams[1]) as session:
                    await session.initialize()
                    names = {tool.name for tool in (await session.list_tools()).tools}
                    return names, [await _call(session, tool, **arguments) for tool, arguments in calls]

    names, answers = asyncio.run(
        run(tenants["alpha"].key, [
            ("memory_recall", {"query": "wiki", "subject": subject}),
            ("profile_patch", {"subject": subject, "type": "user", "content": {"occupation": "pilot"}}),
            ("profile_get", {"subject": subject, "type": "user"}),
        ])
    )  # fmt: skip
    assert names == TOOLS and not any(failed for failed, _ in answers)
    assert "wiki.example" in answers[0][1]
    assert json.loads(answers[2][1])["user_memory"]["occupation"] == "pilot"
    alpha.put(f"/v1/profiles/{subject}/user/status", json={"status": "disabled"})
    _, [(_, disabled)] = asyncio.run(run(tenants["alpha"].key, [("profile_get", {"subject": subject})]))
    assert json.loads(disabled)["user_memory"] is None  # a disabled document is left out of tool answers
    _, [(failed, text)] = asyncio.run(run(tenants["beta"].key, [("memory_recall", {"query": "wiki"})]))
    assert not failed and text == ""
