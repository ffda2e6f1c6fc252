"""An API contract outside tools accept (issue 28 item 11), against the real server: JSON context is valid
JSON when nothing is found, /mcp answers 401 with WWW-Authenticate: Bearer for a missing, invalid or revoked
key at initialize, the OpenAPI document resolves every $ref and declares a bearer scheme and every error
status as JSON, the access log goes on after save_info and never shows a query string, /docs and /redoc
load their assets from the server, the docs/agents.md calls work as written, and Schemathesis with all
checks finds nothing (bounded for CI time: fuzzing and stateful phases, 10 examples an operation; the
tenancy check runs every phase, the coverage phase's boundary cases included, with 20)."""

from __future__ import annotations

import logging
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx
import pytest
import uvicorn
from sqlalchemy import Engine

from strataflow.config import Settings
from tests.fixtures.service import Tenant, make_tenant

ROOT = Path(__file__).resolve().parents[2]
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": "contract-test", "version": "1"}}}  # fmt: skip
CLI = "import sys; from schemathesis.cli import schemathesis; sys.exit(schemathesis())"
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def test_json_context_for_nothing_found_is_valid_json(api_url: str, tenants: dict[str, Tenant]) -> None:
    alpha = tenants["alpha"].client(api_url)
    query = {"subject": f"nobody_{uuid.uuid4().hex[:6]}", "query": "hello", "format": "json"}
    for response in (alpha.get("/v1/context", params=query), alpha.post("/v1/context", json=query)):
        assert response.status_code == 200 and response.headers["content-type"].startswith("application/json")
        assert response.json()["memory_context"]["pieces"] == []
    text_answer = alpha.get("/v1/context", params={**query, "format": "text"})
    assert text_answer.status_code == 200 and text_answer.text == ""  # seed 003: inject nothing


def test_mcp_initialize_without_a_usable_key_is_401_with_a_bearer_challenge(
    api_url: str, engine: Engine
) -> None:
    from strataflow.service import keys

    revoked = make_tenant(engine, "agent", (f"mcp_{uuid.uuid4().hex[:6]}",))
    with engine.begin() as conn:
        assert keys.revoke_key(conn, revoked.role)
    invalid = "Bearer sf_0badc0de_" + "x" * 43
    for auth in (invalid, f"Bearer {revoked.key}", None, "Basic dXNlcjpwdw=="):
        headers = {"Authorization": auth} if auth else {}
        refused = httpx.post(f"{api_url}/mcp", json=INIT, headers={**MCP_HEADERS, **headers}, timeout=60)
        assert refused.status_code == 401, refused.text
        assert refused.headers["www-authenticate"].lower().startswith("bearer")
    refused = httpx.get(f"{api_url}/v1/memories", headers={"Authorization": "Bearer nope"})
    assert refused.status_code == 401 and refused.headers["www-authenticate"].lower().startswith("bearer")


def test_the_openapi_document_resolves_and_says_what_the_service_returns(api_url: str) -> None:
    doc = httpx.get(f"{api_url}/openapi.json").json()
    refs: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            refs.extend(v for k, v in node.items() if k == "$ref")
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    def resolve(ref: str) -> Any:
        node: Any = doc
        for part in ref.removeprefix("#/").split("/"):
            node = node[unquote(part).replace("~1", "/").replace("~0", "~")]
        return node

    walk(doc)
    assert refs and all(ref.startswith("#/") and resolve(ref) is not None for ref in refs)
    assert doc["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http", "scheme": "bearer", "bearerFormat": "sf_<8 hex>_<43 characters>",
        "description": "An API key from `strataflow access create-key NAME --role ROLE [--agent AGENT_ID]`.",
    }  # fmt: skip
    for path, operations in doc["paths"].items():
        for method, operation in operations.items():
            if not path.startswith("/v1/"):
                continue
            assert operation["security"] == [{"bearerAuth": []}], (method, path)
            responses = operation["responses"]
            for status in ("400", "401", "403", "404", "409", "413", "422", "429", "503"):
                assert list(responses[status]["content"]) == ["application/json"], (method, path, status)
    body = doc["paths"]["/v1/messages"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert body["$ref"] == "#/components/schemas/MessagesBody"
    created_at = re.compile(doc["components"]["schemas"]["MessageIn"]["properties"]["created_at"]["pattern"])
    now = datetime.now(UTC)
    assert created_at.match((now - timedelta(hours=2)).isoformat(timespec="seconds"))
    assert created_at.match((now - timedelta(days=10)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    assert not created_at.match("2150-01-01T00:00:00Z") and not created_at.match("1975-01-01T00:00:00Z")
    types = doc["components"]["schemas"]["MemoryCreate"]["properties"]["type"]["enum"]
    assert "hot_summary" not in types and {"user", "project", "feedback", "reference"} <= set(types)


def test_methods_a_path_does_not_take_are_405_with_every_allowed_one(
    api_url: str, tenants: dict[str, Tenant]
) -> None:
    alpha = tenants["alpha"].client(api_url)
    refused = alpha.request("PUT", "/v1/memories")
    assert refused.status_code == 405 and refused.headers["allow"] == "GET, POST"
    refused = alpha.request("OPTIONS", "/v1/memories/1")
    assert refused.status_code == 405 and refused.headers["allow"] == "GET, PATCH, DELETE"
    assert alpha.patch("/v1/memories/search", json={}).status_code == 405


@pytest.fixture(scope="module")
def logged_server(engine: Engine, settings: Settings) -> Iterator[tuple[str, list[str]]]:
    """A server whose access log (uvicorn's, at info) is collected line by line."""
    from strataflow.service.app import create_app

    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler = Collect()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    config = uvicorn.Config(create_app(settings.model_copy(update={"api_rate_per_s": 0.0})),
                            host="127.0.0.1", port=port, log_level="info")  # fmt: skip
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.1)
    logging.getLogger("uvicorn.access").addHandler(handler)
    yield f"http://127.0.0.1:{port}", lines
    logging.getLogger("uvicorn.access").removeHandler(handler)
    server.should_exit = True
    thread.join(60)


def test_the_access_log_goes_on_after_save_info_and_shows_no_query(
    logged_server: tuple[str, list[str]], tenants: dict[str, Tenant], subject: str
) -> None:
    url, lines = logged_server
    alpha = tenants["alpha"].client(url)
    secret = f"secretquery{uuid.uuid4().hex[:6]}"
    alpha.get("/v1/context", params={"subject": subject, "query": secret})
    saved = alpha.post(
        "/v1/save_info", json={"subject": subject, "user_message": "I am 31 and I live in Faro."}
    )
    assert saved.status_code == 200
    for _ in range(2):
        alpha.get("/v1/memories", params={"limit": 2})
    time.sleep(0.5)
    assert sum("GET /v1/memories" in line for line in lines) >= 2, lines[-5:]
    assert any("POST /v1/save_info" in line for line in lines)
    assert not any(secret in line or subject in line for line in lines), "a query string reached the log"


def test_docs_and_redoc_load_their_assets_from_the_server(api_url: str) -> None:
    for page in ("/docs", "/redoc"):
        html = httpx.get(f"{api_url}{page}").text
        assets = re.findall(r'(?:src|href)="([^"]+\.(?:js|css|png))"', html)
        assert assets and all(asset.startswith("/static-offline-docs/") for asset in assets), assets
        assert "cdn" not in html.lower()
        for asset in assets:
            assert httpx.get(f"{api_url}{asset}").status_code == 200


def test_the_agents_guide_calls_work_as_written(api_url: str, tenants: dict[str, Tenant]) -> None:
    guide = (ROOT / "docs" / "agents.md").read_text(encoding="utf-8")
    calls = next(block for block in re.findall(r"```bash\n(.*?)```", guide, re.S) if "curl" in block)
    script = calls.replace("u1", f"guide_{uuid.uuid4().hex[:6]}").replace('"m1"', f'"{uuid.uuid4().hex}"')
    key = tenants["alpha"].key
    script = script.replace("http://127.0.0.1:8700", api_url).replace("KEY=sf_...", f"KEY={key}")
    ran = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    answers = ran.stdout
    assert '"accepted":1' in answers.replace(" ", ""), answers
    assert "Lisbon" in answers.split("<memory-context", 1)[1], "the context call does not find the message"
    assert '"name":"用户偏好-简洁风格"' in answers.replace(" ", "")


def test_schemathesis_with_all_checks_finds_nothing(api_url: str, engine: Engine, tmp_path: Path) -> None:
    fuzzer = make_tenant(engine, "agent", (f"fuzz_{uuid.uuid4().hex[:6]}",))
    # No allowance: the schema says what the routes take (mem0's filters: the parser's grammar, as
    # strataflow.service.mem0_filter_schema; a delete names a user, agent, run or app; an infer=true add one)
    ran = subprocess.run(
        [sys.executable, "-c", CLI,
         "run", f"{api_url}/openapi.json", "-H", f"Authorization: Bearer {fuzzer.key}", "--checks", "all",
         "--phases", "examples,fuzzing,stateful", "--max-examples", "10", "--workers", "1",
         "--request-timeout", "60", "--generation-database", "none",
         "--no-color", "--seed", "28"],
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
    )  # fmt: skip
    summary = [line for line in ran.stdout.splitlines() if re.match(r"^=+ .* =+$", line)]
    assert ran.returncode == 0, ran.stdout[-6000:]
    assert summary and not re.search(r"failure|error", summary[-1]), ran.stdout[-3000:]
