"""The FastAPI application of `strataflow api`: routers, error handlers, the rate limit, the body limit and
the MCP endpoint.

One process = one engine (a small connection pool) and one embedding model, both made ready before the
server accepts requests (the model and the token counter are warmed up, so the first request is not slow).
Endpoints are plain `def` functions: FastAPI runs them on its thread pool, so SQL and embedding never block
the event loop, and `--workers N` adds processes. The OpenAPI reference is at /docs (Swagger UI) and /redoc,
their assets served by this server (strataflow.service.docs_pages: no CDN, they work offline).

Middleware, outermost first: the rate limit (before any database work: strataflow.service.ratelimit), then
the body limit (413). At start the server gives the database its online write window (the owner-run
partition helper follows it: sql/281).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from fastapi import Depends, FastAPI
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from strataflow import __version__
from strataflow.config import Settings, load_settings
from strataflow.db.engine import engine_for
from strataflow.service import docs_pages, errors, metrics, openapi
from strataflow.service.deps import strict_json_body
from strataflow.service.mcp_server import build_server, mount_mcp
from strataflow.service.ratelimit import Buckets, RateLimit, SharedBuckets
from strataflow.service.routes import context, health, mem0, memories, messages, profiles, store, tools
from strataflow.service.server import GuardedH11Protocol
from strataflow.service.session import KNOWN_KEYS_EVERY_S, Sessions

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


def prepare_database(settings: Settings, engine: Engine) -> None:
    """Give the database this server's online write window (owner connection); a database that is down or
    not migrated yet is left to /readyz to report."""
    from strataflow.ingest.online import set_write_window

    try:
        with engine.begin() as conn:
            set_write_window(conn, settings)
    except SQLAlchemyError as exc:
        logger.warning("could not set the online write window: %s", str(exc).splitlines()[0])


async def keep_known_keys(sessions: Sessions) -> None:
    """The active keys' prefixes for the rate limit: at start, then every KNOWN_KEYS_EVERY_S."""
    while True:
        await anyio.to_thread.run_sync(sessions.refresh_known)
        await anyio.sleep(KNOWN_KEYS_EVERY_S)


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


class RedactQuery(logging.Filter):
    """The access log shows a request's path without its query string (a query holds user text: the
    context query, subjects); the log keeps every request, never what it asked."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str) and "?" in args[2]:
            record.args = (*args[:2], args[2].split("?", 1)[0] + "?…", *args[3:])
        return True


def redact_access_log() -> None:
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactQuery) for f in access.filters):
        access.addFilter(RedactQuery())


def rate_buckets(settings: Settings) -> Buckets:
    """The server's buckets: shared by its workers through the file `strataflow api` made, else in-process."""
    if settings.api_rate_file is not None:
        return SharedBuckets(settings.api_rate_file, settings.api_rate_per_s, settings.api_rate_burst)
    return Buckets(settings.api_rate_per_s, settings.api_rate_burst)


def create_app(settings: Settings | None = None) -> FastAPI:
    """The app for one server process (uvicorn calls this factory once per worker)."""
    settings = settings or load_settings()
    GuardedH11Protocol.configure(settings.api_header_timeout_s, settings.api_max_connections)
    redact_access_log()
    engine = engine_for(settings)
    sessions = Sessions(settings, engine)
    agent_mcp = build_server(settings, sessions, writable=True)
    analyst_mcp = build_server(settings, sessions, writable=False)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await anyio.to_thread.run_sync(warm_up, settings)
        await anyio.to_thread.run_sync(prepare_database, settings, engine)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(keep_known_keys, sessions)
            async with agent_mcp.session_manager.run(), analyst_mcp.session_manager.run():
                logger.info("strataflow api ready")
                yield
            tasks.cancel_scope.cancel()
        engine.dispose()

    app = FastAPI(
        title="strataflow agent memory API",
        version=__version__,
        description="Three-layer memory for agents: messages in, context out, seed 003 entries, seed 002 "
        "profiles, seed 000 tools. Authenticate with `Authorization: Bearer KEY` (strataflow access "
        "create-key); the key's role decides the namespace (X-Namespace picks one of several), a key made "
        'with --agent acts as that agent. Errors are {"error": {"code", "message", "field"}}. Under /mem0: '
        "the paths of mem0's platform API for mem0's own client (docs/integrations.md).",
        lifespan=lifespan,
        dependencies=[Depends(strict_json_body)],
        docs_url=None,
        redoc_url=None,
    )
    docs_pages.install(app)
    app.state.settings = settings
    app.state.engine = engine
    app.state.sessions = sessions
    errors.install(app)
    for router in ROUTERS:
        app.include_router(router)
    mount_mcp(app, agent_mcp, analyst_mcp, sessions)
    openapi.install(app, settings)
    app.add_middleware(BodyLimit, limit=settings.api_max_body_bytes)
    app.add_middleware(RateLimit, buckets=rate_buckets(settings), known=sessions.known)
    metrics.install(app, settings, engine)  # outermost when on: sees the rate limit's 429s too
    return app
