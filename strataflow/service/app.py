"""The FastAPI application of `strataflow api`: routers, error handlers, the body limit and the MCP endpoint.

One process = one engine (a small connection pool) and one embedding model, both made ready before the
server accepts requests (the model and the token counter are warmed up, so the first request is not slow).
Endpoints are plain `def` functions: FastAPI runs them on its thread pool, so SQL and embedding never block
the event loop, and `--workers N` adds processes. The OpenAPI reference is at /docs.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from strataflow import __version__
from strataflow.config import Settings, load_settings
from strataflow.db.engine import engine_for
from strataflow.service import errors
from strataflow.service.mcp_server import build_server, mount_mcp
from strataflow.service.routes import context, health, mem0, memories, messages, profiles, store, tools
from strataflow.service.session import Sessions

logger = logging.getLogger(__name__)

ROUTERS = (
    health.router,
    messages.router,
    context.router,
    memories.router,
    profiles.router,
    tools.router,
    mem0.router,
    store.router,
)


def warm_up(settings: Settings) -> None:
    """Load what the first request would otherwise wait for: the embedding model and the token counter."""
    from strataflow.llm.embeddings import get_embedder
    from strataflow.retrieval.context_budget import count_tokens

    get_embedder(settings).encode(["warm up"])
    count_tokens("warm up")


class BodyLimit:
    """413 for a request body over `limit` bytes, by Content-Length or while a chunked body streams in."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.limit:
            response = errors.error_response(
                413, f"the request body is over {self.limit} bytes (STRATAFLOW_API_MAX_BODY_BYTES)"
            )
            await response(scope, receive, send)
            return
        seen = 0

        async def limited() -> Message:
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.limit:
                raise errors.BodyTooLarge()
            return message

        await self.app(scope, limited, send)


def create_app(settings: Settings | None = None) -> FastAPI:
    """The app for one server process (uvicorn calls this factory once per worker)."""
    settings = settings or load_settings()
    engine = engine_for(settings)
    sessions = Sessions(settings, engine)
    mcp = build_server(settings, sessions)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await anyio.to_thread.run_sync(warm_up, settings)
        async with mcp.session_manager.run():
            logger.info("strataflow api ready")
            yield
        engine.dispose()

    app = FastAPI(
        title="strataflow agent memory API",
        version=__version__,
        description="Three-layer memory for agents: messages in, context out, seed 003 entries, seed 002 "
        "profiles, seed 000 tools. Authenticate with `Authorization: Bearer KEY` (strataflow access "
        "create-key); the key's role decides the namespace (X-Namespace picks one of several). Under /mem0: "
        "the paths of mem0's platform API for mem0's own client (docs/integrations.md).",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.engine = engine
    app.state.sessions = sessions
    errors.install(app)
    for router in ROUTERS:
        app.include_router(router)
    mount_mcp(app, mcp, sessions)
    app.add_middleware(BodyLimit, limit=settings.api_max_body_bytes)
    return app
