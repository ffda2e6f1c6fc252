"""The FastAPI application of `strataflow api`: routers, error handlers, the rate limit, the body limit and
the MCP endpoint.

One process = one engine (a small connection pool) and one embedding model, both made ready before the
server accepts requests (the model and the token counter are warmed up, so the first request is not slow).
Endpoints are plain `def` functions: FastAPI runs them on its thread pool, so SQL and embedding never block
the event loop, and `--workers N` adds processes. The OpenAPI reference is at /docs (Swagger UI) and /redoc,
their assets served by this server (strataflow.service.docs_pages: no CDN, they work offline).

Middleware, outermost first: the metrics and spans (when on), the rate limit (before any database work:
strataflow.service.ratelimit), then the body limit (413) with the request's clock (its arrival, from which
a scan's or a heavy request's time limit counts). Each route declares its work (deps.work): a scan or heavy
route takes a fair turn before any connection (strataflow.service.turns, 429 past the wait). At start the
server gives the database its online write window (the owner-run partition helper follows it: sql/281).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from fastapi import Depends, FastAPI
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from strataflow import __version__
from strataflow.config import Settings, load_settings
from strataflow.db.engine import engine_for, work_deadline
from strataflow.service import docs_pages, errors, metrics, openapi
from strataflow.service.balance import ConnectionShare
from strataflow.service.deps import strict_json_body
from strataflow.service.mcp_server import build_server, mount_mcp
from strataflow.service.ratelimit import Buckets, RateLimit, SharedBuckets
from strataflow.service.routes import context, health, mem0, memories, messages, profiles, store, tools
from strataflow.service.server import ConnectionLimits, GuardedH11Protocol
from strataflow.service.session import KNOWN_KEYS_EVERY_S, Sessions

logger = logging.getLogger(__name__)
DB_WATCH_EVERY_S = 5.0

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


async def keep_embedded_database(settings: Settings) -> None:
    """The embedded database this server uses (no DATABASE_URL): started again when it stopped (a crash, a
    kill), checked every DB_WATCH_EVERY_S; requests meanwhile get 503 and /readyz says unreachable."""
    from strataflow.db import embedded

    while True:
        await anyio.sleep(DB_WATCH_EVERY_S)
        try:
            if await anyio.to_thread.run_sync(embedded.is_running, settings.home):
                continue
            logger.warning("the embedded database under %s stopped; starting it again", settings.home)
            await anyio.to_thread.run_sync(embedded.ensure_running, settings.home)
        except Exception as exc:  # noqa: BLE001 - the next round tries again; the log says why
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            logger.warning("could not start the embedded database: %s: %s", type(exc).__name__, reason)


class BodyLimit:
    """413 for a request body over `limit` bytes, by Content-Length or while a chunked body streams in. It
    also starts the request's clock: its arrival (scope state `arrived`), from which the time limit of a scan
    or a heavy request counts, and no work deadline a request before it on the connection left behind."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope.setdefault("state", {})["arrived"] = time.monotonic()
        with work_deadline(None):  # asyncio can carry a context variable into the next task: CPython 140947
            await self._call(scope, receive, send)

    async def _call(self, scope: Scope, receive: Receive, send: Send) -> None:
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


# Path segments that name a subject (a profile's subject, a mem0 entity): logged as "…", so no log file keeps
# a subject id that `strataflow forget` could not reach.
SUBJECT_SEGMENT = re.compile(r"^(/v1/profiles/|/mem0/v2/entities/[^/?]+/)[^/?]+")


class RedactQuery(logging.Filter):
    """The access log shows a request's path without its query string (a query holds user text: the
    context query, subjects) and without a subject named in the path (SUBJECT_SEGMENT); the log keeps every
    request, never what it asked or whom it was about."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            path = SUBJECT_SEGMENT.sub(r"\1…", args[2])
            if "?" in path:
                path = path.split("?", 1)[0] + "?…"
            record.args = (*args[:2], path, *args[3:])
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
    share = ConnectionShare(settings.api_balance_file) if settings.api_balance_file is not None else None
    GuardedH11Protocol.configure(ConnectionLimits.of(settings), share)
    redact_access_log()
    engine = engine_for(settings)
    sessions = Sessions(settings, engine)
    agent_mcp = build_server(settings, sessions, writable=True)
    analyst_mcp = build_server(settings, sessions, writable=False)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await anyio.to_thread.run_sync(sessions.warm_up)
        await anyio.to_thread.run_sync(prepare_database, settings, engine)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(keep_known_keys, sessions)
            if settings.database_url is None:
                tasks.start_soon(keep_embedded_database, settings)
            async with agent_mcp.session_manager.run(), analyst_mcp.session_manager.run():
                logger.info("strataflow api ready")
                yield
            tasks.cancel_scope.cancel()
        engine.dispose()
        if share is not None:
            share.close()

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
        telemetry={"exclude": metrics.untraced},  # a scrape or a probe makes no trace
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
