"""The MCP server (official `mcp` SDK): the memory tools of seeds 000-003 for any MCP client.

Transports: stdio (`strataflow mcp`, the key from STRATAFLOW_API_KEY, the namespace from
STRATAFLOW_API_NAMESPACE when the key's role has several) and streamable HTTP at /mcp on the API server (the
key as `Authorization: Bearer KEY`, X-Namespace as over HTTP). Every tool call is one transaction as the key's
role (strataflow.service.session), the same as an HTTP request, and one call into the library.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal

from fastapi import FastAPI
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import ToolAnnotations
from pydantic import Field
from sqlalchemy import Connection
from starlette.types import ASGIApp, Receive, Scope, Send

from models.memory_items import MemoryHit
from strataflow import __version__
from strataflow.config import Settings
from strataflow.db.roles import AccessError
from strataflow.memory import api, profiles
from strataflow.memory.prompts import memory_system_prompt
from strataflow.pipeline.save_info import save_exchange
from strataflow.retrieval.context import build_context
from strataflow.retrieval.item_search import search_memories
from strataflow.retrieval.user_context import get_user_context as user_context
from strataflow.service.deps import bearer_token
from strataflow.service.errors import error_response
from strataflow.service.keys import Caller, KeyRejected, NamespaceRequired
from strataflow.service.session import RateLimited, Sessions

INSTRUCTIONS = (
    "Long-term memory of users and projects (strataflow). Call get_context before answering a user to see "
    "what is known about them; save durable facts with memory_save (or save_user_memory for a whole "
    "exchange); look things up with memory_recall.\n\n" + memory_system_prompt("en")
)
Subject = Annotated[str, Field(description="the user the memory is about (their stable id)", min_length=1)]
Agent = Annotated[
    str | None, Field(description="your agent name: you see your own entries, shared ones and common ones")
]
SeedType = Annotated[
    Literal["user", "project", "feedback", "reference"],
    Field(
        description="user: the user's preferences, role, habits; project: progress, decisions, constraints; "
        "feedback: the user correcting or confirming you; reference: links and documents"
    ),
]
EntryId = Annotated[int, Field(description="the entry id, as memory_recall or memory_save returned it")]
Title = Annotated[str, Field(description="a short title, in any language")]
Content = Annotated[str, Field(description="what to remember, in full sentences")]
OneLine = Annotated[str, Field(description="one line: when this memory is relevant")]
Shared = Annotated[bool, Field(description="let other agents read it (only with agent)")]
Search = Annotated[str, Field(description="what you want to remember, as keywords or a question")]
Limit = Annotated[int, Field(ge=1, le=50, description="how many entries at most")]
Budget = Annotated[int, Field(ge=64, le=32_000, description="token budget of the block")]
Profile = Annotated[
    Literal["user", "work", "both", "none"], Field(description="also include the user's profile document(s)")
]
DocType = Annotated[
    Literal["user", "work"], Field(description="user (personal) or work (professional) document")
]
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)


def _tool(
    server: MCPServer, name: str, annotations: ToolAnnotations
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a tool under `name`; its docstring, on one line, is the description the model reads."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        description = " ".join(inspect.cleandoc(fn.__doc__ or "").split())
        server.add_tool(fn, name=name, description=description, annotations=annotations)
        return fn

    return register


def build_server(settings: Settings, sessions: Sessions) -> MCPServer:
    """The server with its nine tools; the same object serves stdio and the /mcp endpoint."""
    server: MCPServer = MCPServer("strataflow", instructions=INSTRUCTIONS, version=__version__)

    @contextmanager
    def session(ctx: Context, write: bool = False) -> Iterator[tuple[Connection, Caller]]:
        headers = ctx.headers
        key = bearer_token(headers.get("authorization")) if headers is not None else _secret(settings)
        namespace = headers.get("x-namespace") if headers is not None else settings.api_namespace
        with _tool_errors(), sessions.open(key, namespace, limit=headers is not None) as (conn, caller):
            if write and caller.kind != "agent":
                raise ToolError(
                    f"the key's role {caller.role!r} is read-only ({caller.kind}); it cannot save"
                )
            yield conn, caller

    @_tool(server, "memory_save", WRITES)
    def memory_save(
        subject: Subject,
        type: SeedType,
        name: Title,
        content: Content,
        ctx: Context,
        description: OneLine = "",
        agent: Agent = None,
        shared: Shared = False,
    ) -> dict[str, Any]:
        """Save a new long-term memory entry about a user. If an entry with this name exists for the user,
        this fails and names it: update that entry with memory_update instead of creating a duplicate."""
        with session(ctx, write=True) as (conn, caller):
            saved = api.create_memory(
                conn, caller.namespace, subject, type, name, content, description=description,
                agent_id=agent, shared=shared, settings=settings,
            )  # fmt: skip
        return saved.item.model_dump(mode="json")

    @_tool(server, "memory_recall", READ_ONLY)
    def memory_recall(
        query: Search, ctx: Context, subject: Subject | None = None, limit: Limit = 5, agent: Agent = None
    ) -> str:
        """Search long-term memory (English and Chinese). Returns the best entries, each with its type, name,
        id and content; an empty answer means nothing relevant is stored."""
        with session(ctx) as (conn, caller):
            hits = search_memories(
                conn, settings, caller.namespace, query, subject, agent_id=agent, limit=limit
            )
        return render_hits(hits)

    @_tool(server, "memory_update", WRITES)
    def memory_update(
        id: EntryId,
        ctx: Context,
        content: Content | None = None,
        name: Title | None = None,
        description: OneLine | None = None,
        type: SeedType | None = None,
        shared: Shared | None = None,
        agent: Agent = None,
    ) -> dict[str, Any]:
        """Change an existing memory entry (only the fields given); the old version is kept in its history."""
        with session(ctx, write=True) as (conn, caller):
            updated = api.update_memory(
                conn, caller.namespace, id, agent_id=agent, type=type, name=name, description=description,
                value=api.UNSET if content is None else content, shared=shared, settings=settings,
            )  # fmt: skip
        return updated.item.model_dump(mode="json")

    @_tool(server, "memory_delete", DESTRUCTIVE)
    def memory_delete(id: EntryId, ctx: Context, agent: Agent = None) -> dict[str, Any]:
        """Delete a memory entry that is wrong or no longer true (its history is kept)."""
        with session(ctx, write=True) as (conn, caller):
            deleted = api.delete_memory(conn, caller.namespace, id, agent_id=agent)
        return deleted.item.model_dump(mode="json")

    @_tool(server, "get_context", READ_ONLY)
    def get_context(
        subject: Subject,
        query: Annotated[str, Field(description="the user's current message")],
        ctx: Context,
        budget: Budget = 2000,
        profile: Profile = "none",
        agent: Agent = None,
    ) -> str:
        """The memory block to put in your prompt before answering `query`: key facts, recent messages,
        weekly reports, chosen by the question's intent within the budget. Empty when nothing is known."""
        with session(ctx) as (conn, caller):
            result = build_context(
                conn, settings, caller.namespace, subject, query, budget, profile=profile, agent_id=agent
            )
        return result.text

    @_tool(server, "save_user_memory", WRITES)
    def save_user_memory(
        subject: Subject,
        user_message: Annotated[str, Field(description="what the user said")],
        ctx: Context,
        assistant_message: Annotated[str | None, Field(description="your reply (read for context)")] = None,
        existing_info: Annotated[dict[str, Any] | None, Field(description="what you already know")] = None,
    ) -> dict[str, Any]:
        """Extract and save what the user stated about themselves in one exchange (age, job, location,
        plans, ...). Only facts the user said explicitly are kept; returns what was saved and skipped."""
        with session(ctx, write=True) as (conn, caller):
            saved = save_exchange(
                conn, settings, caller.namespace, subject, user_message, assistant_message, existing_info
            )
        return saved.model_dump(mode="json")

    @_tool(server, "get_user_context", READ_ONLY)
    def get_user_context(
        subject: Subject,
        query: Annotated[str, Field(description="what you need to know")],
        ctx: Context,
        agent: Agent = None,
    ) -> dict[str, Any]:
        """The user's memories relevant to `query`, a short profile summary and how many memories exist."""
        with session(ctx) as (conn, caller):
            found = user_context(conn, settings, caller.namespace, subject, query, agent_id=agent)
        return found.model_dump(mode="json")

    @_tool(server, "profile_get", READ_ONLY)
    def profile_get(subject: Subject, ctx: Context, type: DocType | None = None) -> dict[str, Any]:
        """The user's profile documents (seed 002): user_memory (personal) and work_memory (professional), or
        only the one of `type`; a document the user disabled reads as null."""
        with session(ctx) as (conn, caller):
            documents = profiles.get_profiles(conn, caller.namespace, subject, include_disabled=False)
        return documents if type is None else {f"{type}_memory": documents[f"{type}_memory"]}

    @_tool(server, "profile_patch", WRITES)
    def profile_patch(
        subject: Subject,
        type: DocType,
        content: Annotated[dict[str, Any], Field(description="the fields to set, shaped as the document")],
        ctx: Context,
    ) -> dict[str, Any]:
        """Set fields of the user's user or work profile document; fields not given stay as they are."""
        with session(ctx, write=True) as (conn, caller):
            document = profiles.patch_profile(conn, caller.namespace, subject, type, content)
        return document.model_dump(mode="json")

    return server


@contextmanager
def _tool_errors() -> Iterator[None]:
    """Library errors as tool errors an LLM can act on."""
    try:
        yield
    except api.MemoryNotFound as exc:
        raise ToolError(f"{exc}; call memory_recall to find the entry's id") from None
    except api.MemoryConflict as exc:
        raise ToolError(f"{exc} with memory_update (id {exc.item_id})") from None
    except (KeyRejected, AccessError, NamespaceRequired, api.MemoryForbidden, RateLimited) as exc:
        raise ToolError(str(exc)) from None
    except ValueError as exc:
        field = getattr(exc, "field", None)
        raise ToolError(f"invalid {field}: {exc}" if field else str(exc)) from None


def render_hits(hits: list[MemoryHit]) -> str:
    """Entries as seed 003's memory-context lines: `[type] name (id N)` then the content; '' for none."""
    return "\n\n".join(f"[{hit.type}] {hit.name} (id {hit.id})\n{hit.content}" for hit in hits)


def _secret(settings: Settings) -> str | None:
    return settings.api_key.get_secret_value() if settings.api_key is not None else None


class RequireKey:
    """The /mcp endpoint answers 401 before the MCP layer when a request has no usable bearer key."""

    def __init__(self, app: ASGIApp, sessions: Sessions) -> None:
        self.app, self.sessions = app, sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        if scope["type"] == "http" and bearer_token(headers.get("authorization")) is None:
            response = error_response(
                401, "no API key: send Authorization: Bearer <key>", code="unauthorized"
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def mount_mcp(app: FastAPI, server: MCPServer, sessions: Sessions) -> None:
    """Serve the MCP server's streamable HTTP transport at /mcp (stateless: each call stands alone)."""
    # Every request needs a bearer key, which a page in a browser cannot send: the SDK's DNS-rebinding guard
    # (which refuses any Host but localhost) would only stop a reverse proxy.
    mcp_app = server.streamable_http_app(
        streamable_http_path="/mcp", stateless_http=True, json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )  # fmt: skip
    for route in mcp_app.routes:
        endpoint = getattr(route, "app", None)
        if endpoint is not None:
            route.app = RequireKey(endpoint, sessions)  # type: ignore[attr-defined]
        app.router.routes.append(route)
