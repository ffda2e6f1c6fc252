"""The real service for the tests: uvicorn on 127.0.0.1 in a thread (the app of `strataflow api`), tenants
made the way a user makes them (roles, grants, API keys), and httpx clients carrying their keys.

Two servers share the session database: `api_url` with the rate limit off, `limited_url` with a small one.
Tests write under subjects of their own (the `subject` fixture), since the tenants live for the session.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import uvicorn
from sqlalchemy import Engine

from strataflow.config import Settings


@dataclass(frozen=True)
class Tenant:
    """A role of one kind with its namespaces, and an API key bound to it."""

    role: str
    kind: str
    namespaces: tuple[str, ...]
    key: str

    @property
    def namespace(self) -> str:
        return self.namespaces[0]

    def client(self, url: str, **headers: str) -> httpx.Client:
        return httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {self.key}", **headers}, timeout=120
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(settings: Settings) -> Iterator[str]:
    from strataflow.service.app import create_app

    port = _free_port()
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"api-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + 300
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            pytest.fail("the API server did not start")
        time.sleep(0.1)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=60)


@pytest.fixture(scope="session")
def api_url(engine: Engine, settings: Settings) -> Iterator[str]:
    yield from _serve(settings.model_copy(update={"api_rate_per_s": 0.0}))


@pytest.fixture(scope="session")
def limited_url(engine: Engine, settings: Settings) -> Iterator[str]:
    yield from _serve(settings.model_copy(update={"api_rate_per_s": 0.2, "api_rate_burst": 3}))


def make_tenant(
    engine: Engine, kind: str, namespaces: tuple[str, ...], expires_days: int | None = None
) -> Tenant:
    from strataflow.db import roles
    from strataflow.service import keys

    role = f"t_{kind}_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        roles.create_role(conn, role, kind, with_password=False)
        for namespace in namespaces:
            roles.grant(conn, role, namespace)
        key, _ = keys.create_key(conn, role, role, expires_days)
    return Tenant(role, kind, namespaces, key)


@pytest.fixture(scope="session")
def tenants(engine: Engine) -> dict[str, Tenant]:
    """alpha and beta: agents of one namespace each; reader: an analyst of alpha's namespace; both: an agent
    granted both namespaces."""
    alpha, beta = f"svc_alpha_{uuid.uuid4().hex[:6]}", f"svc_beta_{uuid.uuid4().hex[:6]}"
    return {
        "alpha": make_tenant(engine, "agent", (alpha,)),
        "beta": make_tenant(engine, "agent", (beta,)),
        "reader": make_tenant(engine, "analyst", (alpha,)),
        "both": make_tenant(engine, "agent", (alpha, beta)),
    }


@pytest.fixture
def subject() -> str:
    """A subject no other test writes about."""
    return f"user_{uuid.uuid4().hex[:8]}"
