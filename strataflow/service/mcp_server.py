"""The MCP server (official `mcp` SDK): the memory tools of seeds 000-003 for any MCP client.

Transports: stdio (`strataflow mcp`, the key from STRATAFLOW_API_KEY, the namespace from
STRATAFLOW_API_NAMESPACE when the key's role has several) and streamable HTTP at /mcp on the API server (the
key as `Authorization: Bearer KEY`, X-Namespace as over HTTP). Every tool call is one transaction as the key's
role (strataflow.service.session), the same as an HTTP request, and one call into the library.

- The caller is identified once per call (over /mcp: once per request, by the endpoint's key check), and
  who the call acts as is decided once (keys.Acting: the key's agent or the `agent` argument); a write tool
  asks `Acting.require_writer`, the one read-only rule of every surface.
- The tools that encode (memory_recall, get_context, get_user_context: a query; memory_save, memory_update:
  the text they save) are scans, as their HTTP routes: a fair turn first, then their work within
  STRATAFLOW_API_SCAN_MAX_S (Sessions.turn).

- /mcp checks the key before the MCP layer sees the request: a missing, invalid, revoked or expired key is
  401 with `WWW-Authenticate: Bearer` (initialize included), so a client asks for a key instead of starting
  an OAuth flow.
- An analyst key (read-only) is offered the read tools only; an agent key all nine.
- Tool arguments carry the HTTP API's limits (lengths, patterns, enums: strataflow.service.schemas).
- Every answer that holds user text is written by the one escaping function (quote_text / json_text of
  strataflow.llm.prompt_blocks): no stored text can close a block or a marker, or start a line of its own.
- memory_recall labels each hit with its subject (a recall without `subject` searches every subject of the
  namespace the key's agent may see).
- A tool error says why: `database unavailable`, `forbidden: ...`, `invalid <field>: ...`, not found, taken.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal, TypeVar

import anyio
from fastapi import FastAPI
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field
from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from models.memory_items import MemoryHit
from models.messages import SAFE_ID
from strataflow import __version__
from strataflow.config import Settings
from strataflow.db.engine import WorkDeadline
from strataflow.db.roles import AccessError
from strataflow.llm.prompt_blocks import json_text, quote_text
from strataflow.memory import api, profiles
from strataflow.memory.prompts import memory_system_prompt
from strataflow.pipeline.save_info import save_exchange
from strataflow.retrieval.context import build_context
from strataflow.retrieval.item_search import search_memories
from strataflow.retrieval.user_context import get_user_context as user_context
from strataflow.service import schemas
from strataflow.service.deps import bearer_token, opener_for
from strataflow.service.errors import BEARER_CHALLENGE, error_response
from strataflow.service.keys import Acting, Caller, KeyRejected, NamespaceRequired
from strataflow.service.session import Busy, Sessions

INSTRUCTIONS = (
    "Long-term memory of users and projects (strataflow). Call get_context before answering a user to see "
    "what is known about them; save durable facts with memory_save (or save_user_memory for a whole "
    "exchange); look things up with memory_recall.\n\n" + memory_system_prompt("en")
)
Subject = Annotated[
    str,
    Field(
        description="the user the memory is about (their stable id; no '/' or control characters)",
        min_length=1,
        max_length=schemas.ID_MAX,
        pattern=SAFE_ID,
    ),
]
Agent = Annotated[
    str | None,
    Field(
        description="your agent name: you see your own entries, shared ones and common ones (a key bound "
        "to an agent acts as that agent; naming another is refused)",
        min_length=1,
        max_length=schemas.ID_MAX,
        pattern=SAFE_ID,
    ),
]
SeedType = Annotated[
    Literal["user", "project", "feedback", "reference"],
    Field(
        description="user: the user's preferences, role, habits; project: progress, decisions, constraints; "
        "feedback: the user correcting or confirming you; reference: links and documents"
    ),
]
EntryId = Annotated[
    int, Field(ge=1, le=2**63 - 1, description="the entry id, as memory_recall or memory_save returned it")
]
Title = Annotated[
    str, Field(min_length=1, max_length=schemas.NAME_MAX, description="a short title, in any language")
]
Content = Annotated[
    str, Field(min_length=1, max_length=schemas.TEXT_MAX, description="what to remember, in full sentences")
]
OneLine = Annotated[
    str, Field(max_length=schemas.DESCRIPTION_MAX, description="one line: when this memory is relevant")
]
Shared = Annotated[bool, Field(description="let other agents read it (only with an agent)")]
Search = Annotated[
    str,
    Field(
        min_length=1,
        max_length=schemas.QUERY_MAX,
        description="what you want to remember, as keywords or a question",
    ),
]
Question = Annotated[
    str,
    Field(max_length=schemas.QUERY_MAX, description="the user's current message or what you need to know"),
]
Said = Annotated[str, Field(min_length=1, max_length=schemas.TEXT_MAX, description="what the user said")]
Limit = Annotated[int, Field(ge=1, le=50, description="how many entries at most")]
Threshold = Annotated[
    float | None,
    Field(ge=0, le=1, description="only entries scoring at least this (0..1, docs/retrieval.md)"),
]
Explained = Annotated[
    bool, Field(description="add to each entry why it was recalled: its score's logit in parts")
]
Budget = Annotated[int, Field(ge=64, le=32_000, description="token budget of the block")]
Profile = Annotated[
    Literal["user", "work", "both", "none"], Field(description="also include the user's profile document(s)")
]
DocType = Annotated[
    Literal["user", "work"], Field(description="user (personal) or work (professional) document")
]
JsonAnswer = Annotated[CallToolResult, dict[str, Any]]
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)
WRITE_TOOLS = frozenset(
    {"memory_save", "memory_update", "memory_delete", "save_user_memory", "profile_patch"}
)
T = TypeVar("T")


def _tool(
    server: MCPServer, name: str, annotations: ToolAnnotations, writable: bool
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a tool under `name` (a write tool only on a writable server); its docstring, on one line, is
    the description the model reads."""

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in WRITE_TOOLS and not writable:
            return fn
        description = " ".join(inspect.cleandoc(fn.__doc__ or "").split())
        server.add_tool(fn, name=name, description=description, annotations=annotations)
        return fn

    return register


def build_server(settings: Settings, sessions: Sessions, writable: bool = True) -> MCPServer:
    """The server with its nine tools (the five read tools only, for analyst keys: writable=False); the same
    object serves stdio and the /mcp endpoint."""
    server: MCPServer = MCPServer("strataflow", instructions=INSTRUCTIONS, version=__version__)

    def key_of(ctx: Context) -> str | None:
        """The request's bearer key over /mcp; the server's own settings over stdio."""
        headers = ctx.headers
        return bearer_token(headers.get("authorization")) if headers is not None else _secret(settings)

    def namespace_of(ctx: Context) -> str | None:
        headers = ctx.headers
        return headers.get("x-namespace") if headers is not None else settings.api_namespace

    def identify(ctx: Context) -> Caller:
        """The call's caller: the one /mcp's key check found (McpEndpoint), else identified now."""
        request = getattr(ctx.request_context, "request", None)
        known = getattr(getattr(request, "state", None), "caller", None)
        if isinstance(known, Caller):
            return known.in_namespace(namespace_of(ctx))
        return sessions.identify(key_of(ctx), namespace_of(ctx))

    @contextmanager
    def session(
        ctx: Context, agent: str | None = None, write: bool = False
    ) -> Iterator[tuple[Connection, Acting]]:
        """One transaction as the caller, and who the call acts as (a write tool: a writer's key)."""
        with _tool_errors():
            caller = identify(ctx)
            acting = caller.acting(agent)
            if write:
                acting.require_writer()
            with sessions.open(None, None, caller) as (conn, _):
                yield conn, acting

    async def scan(
        ctx: Context, agent: str | None, work: Callable[[Connection, Acting], T], write: bool = False
    ) -> T:
        """A tool that encodes (a query, or the text it saves): a turn of the caller (no thread or connection
        held while it waits), then `work` in one transaction within the scan's time limit (Sessions.turn)."""
        await anyio.to_thread.run_sync(sessions.warm_up)  # stdio: the models may still be loading
        arrived = time.monotonic()
        with _tool_errors():
            caller = await anyio.to_thread.run_sync(identify, ctx)
            acting = caller.acting(agent)
            if write:
                acting.require_writer()
            async with sessions.turn(caller, "scan", arrived):

                def run() -> T:
                    with sessions.open(None, None, caller) as (conn, _):
                        return work(conn, acting)

                return await anyio.to_thread.run_sync(run)

    @_tool(server, "memory_save", WRITES, writable)
    async def memory_save(
        subject: Subject,
        type: SeedType,
        name: Title,
        content: Content,
        ctx: Context,
        description: OneLine = "",
        agent: Agent = None,
        shared: Shared = False,
    ) -> JsonAnswer:
        """Save a new long-term memory entry about a user. If an entry with this name exists for the user,
        this fails and names it: update that entry with memory_update instead of creating a duplicate."""
        saved = await scan(ctx, agent, lambda conn, acting: api.create_memory(
            conn, acting.namespace, subject, type, name, content, description=description,
            agent_id=acting.agent, shared=shared, settings=settings,
        ), write=True)  # fmt: skip
        return json_answer(saved.item.model_dump(mode="json"))

    @_tool(server, "memory_recall", READ_ONLY, writable)
    async def memory_recall(
        query: Search,
        ctx: Context,
        subject: Subject | None = None,
        limit: Limit = 5,
        agent: Agent = None,
        threshold: Threshold = None,
        explain: Explained = False,
    ) -> str:
        """Search long-term memory (English and Chinese). Returns the best entries, each with its type, name,
        id, subject and content (each value a quoted string); without `subject` it searches every user of
        the namespace. An empty answer means nothing relevant is stored. `explain`: each entry also says why
        it was recalled (its score's logit in parts)."""
        hits = await scan(ctx, agent, lambda conn, acting: search_memories(
            conn, settings, acting.namespace, query, subject, agent_id=acting.agent, limit=limit,
            threshold=threshold, explain=explain,
        ))  # fmt: skip
        return render_hits(hits)

    @_tool(server, "memory_update", WRITES, writable)
    async def memory_update(
        id: EntryId,
        ctx: Context,
        content: Content | None = None,
        name: Title | None = None,
        description: OneLine | None = None,
        type: SeedType | None = None,
        shared: Shared | None = None,
        agent: Agent = None,
    ) -> JsonAnswer:
        """Change an existing memory entry (only the fields given); the old version is kept in its history."""
        updated = await scan(ctx, agent, lambda conn, acting: api.update_memory(
            conn, acting.namespace, id, agent_id=acting.agent, type=type, name=name, description=description,
            value=api.UNSET if content is None else content, shared=shared, settings=settings,
        ), write=True)  # fmt: skip
        return json_answer(updated.item.model_dump(mode="json"))

    @_tool(server, "memory_delete", DESTRUCTIVE, writable)
    def memory_delete(id: EntryId, ctx: Context, agent: Agent = None) -> JsonAnswer:
        """Delete a memory entry that is wrong or no longer true (its history is kept)."""
        with session(ctx, agent, write=True) as (conn, acting):
            deleted = api.delete_memory(conn, acting.namespace, id, agent_id=acting.agent)
        return json_answer(deleted.item.model_dump(mode="json"))

    @_tool(server, "get_context", READ_ONLY, writable)
    async def get_context(
        subject: Subject,
        query: Question,
        ctx: Context,
        budget: Budget = 2000,
        profile: Profile = "none",
        agent: Agent = None,
    ) -> str:
        """The memory block to put in your prompt before answering `query`: key facts, recent messages,
        weekly reports, chosen by the question's intent within the budget. Empty when nothing is known."""
        result = await scan(ctx, agent, lambda conn, acting: build_context(
            conn, settings, acting.namespace, subject, query, budget, profile=profile, agent_id=acting.agent,
        ))  # fmt: skip
        return result.text

    @_tool(server, "save_user_memory", WRITES, writable)
    async def save_user_memory(
        subject: Subject,
        user_message: Said,
        ctx: Context,
        assistant_message: Annotated[
            str | None, Field(max_length=schemas.TEXT_MAX, description="your reply (read for context)")
        ] = None,
        existing_info: Annotated[dict[str, Any] | None, Field(description="what you already know")] = None,
    ) -> JsonAnswer:
        """Extract and save what the user stated about themselves in one exchange (age, job, location,
        plans, ...). Only facts the user said explicitly are kept; returns what was saved and skipped."""

        def save() -> dict[str, Any]:
            with _tool_errors():  # no connection held while the model answers
                caller = identify(ctx)
                caller.require_writer()  # before the model is asked
                saved = save_exchange(
                    opener_for(sessions, caller), settings, caller.namespace, subject, user_message,
                    assistant_message, existing_info,
                )  # fmt: skip
            return saved.model_dump(mode="json")

        async with sessions.llm_slot(key_of(ctx)):  # the key's turn first, then a connection
            return json_answer(await anyio.to_thread.run_sync(save))

    @_tool(server, "get_user_context", READ_ONLY, writable)
    async def get_user_context(
        subject: Subject, query: Question, ctx: Context, agent: Agent = None
    ) -> JsonAnswer:
        """The user's memories relevant to `query`, a short profile summary and how many memories exist."""
        found = await scan(ctx, agent, lambda conn, acting: user_context(
            conn, settings, acting.namespace, subject, query, agent_id=acting.agent
        ))  # fmt: skip
        return json_answer(found.model_dump(mode="json"))

    @_tool(server, "profile_get", READ_ONLY, writable)
    def profile_get(subject: Subject, ctx: Context, type: DocType | None = None) -> JsonAnswer:
        """The user's profile documents (seed 002): user_memory (personal) and work_memory (professional), or
        only the one of `type`; a document the user disabled reads as null."""
        with session(ctx) as (conn, acting):
            documents = profiles.get_profiles(conn, acting.namespace, subject, include_disabled=False)
        return json_answer(documents if type is None else {f"{type}_memory": documents[f"{type}_memory"]})

    @_tool(server, "profile_patch", WRITES, writable)
    def profile_patch(
        subject: Subject,
        type: DocType,
        content: Annotated[dict[str, Any], Field(description="the fields to set, shaped as the document")],
        ctx: Context,
    ) -> JsonAnswer:
        """Set fields of the user's user or work profile document; fields not given stay as they are."""
        with session(ctx, write=True) as (conn, acting):
            document = profiles.patch_profile(conn, acting.namespace, subject, type, content)
        return json_answer(document.model_dump(mode="json"))

    return server


def json_answer(data: dict[str, Any]) -> CallToolResult:
    """A tool answer: the data as escaped JSON text (what the model reads) and as structured content."""
    return CallToolResult(
        content=[TextContent(type="text", text=json_text(data, indent=2))], structured_content=data
    )


@contextmanager
def _tool_errors() -> Iterator[None]:
    """Library errors as tool errors an LLM can act on: each says why."""
    try:
        yield
    except api.MemoryNotFound as exc:
        raise ToolError(f"not found: {exc}; call memory_recall to find the entry's id") from None
    except api.MemoryConflict as exc:
        raise ToolError(f"name taken: {exc} with memory_update (id {exc.item_id})") from None
    except KeyRejected as exc:
        raise ToolError(f"unauthorized: {exc}") from None
    except (AccessError, api.MemoryForbidden) as exc:
        raise ToolError(f"forbidden: {exc}") from None
    except NamespaceRequired as exc:
        raise ToolError(f"namespace required: {exc} (STRATAFLOW_API_NAMESPACE over stdio)") from None
    except ValueError as exc:
        field = getattr(exc, "field", None)
        raise ToolError(f"invalid {field}: {exc}" if field else f"invalid value: {exc}") from None
    except Busy as exc:
        raise ToolError(f"busy: {exc}") from None
    except WorkDeadline as exc:
        raise ToolError(f"too much work: {exc}") from None
    except (OperationalError, PoolTimeout):
        raise ToolError("database unavailable; retry shortly") from None
    except DBAPIError as exc:
        sqlstate = getattr(exc.orig, "sqlstate", None) or ""
        if sqlstate == "42501":
            raise ToolError("forbidden: the key's role may not do this") from None
        if sqlstate == "57014":
            raise ToolError("too much work: past its time limit (STRATAFLOW_API_SCAN_MAX_S)") from None
        if sqlstate.startswith("22"):
            raise ToolError(f"invalid value: {str(exc.orig).splitlines()[0]}") from None
        raise


def render_hits(hits: list[MemoryHit]) -> str:
    """Entries as memory-context lines, every stored value a quoted string (quote_text): `[type] "name"
    (id N, subject "S", score X)` then the content on the next line; '' for none."""
    return "\n".join(
        f"[{hit.type}] {quote_text(hit.name)} (id {hit.id}, subject {quote_text(hit.subject)}, "
        f"score {hit.score:g}{_why(hit)})\n{quote_text(hit.content)}"
        for hit in hits
    )


def _why(hit: MemoryHit) -> str:
    """', logit z = signal part + ...' when the hit was explained, else ''."""
    if hit.explain is None:
        return ""
    parts = " ".join(f"{name} {value:+g}" for name, value in hit.explain.parts.items())
    note = f" ({hit.explain.uncalibrated})" if hit.explain.uncalibrated else ""
    return f", logit {hit.explain.logit:g} = {parts}{note}"


def _secret(settings: Settings) -> str | None:
    return settings.api_key.get_secret_value() if settings.api_key is not None else None


class McpEndpoint:
    """/mcp: the key is checked before the MCP layer (401 + WWW-Authenticate: Bearer when it cannot be used,
    503 when the database cannot say), then an agent key reaches the full server, an analyst key the
    read-only one."""

    def __init__(self, agent_app: ASGIApp, analyst_app: ASGIApp, sessions: Sessions) -> None:
        self.agent_app, self.analyst_app, self.sessions = agent_app, analyst_app, sessions

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.agent_app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        try:
            caller = await anyio.to_thread.run_sync(
                self.sessions.authenticate, bearer_token(headers.get("authorization"))
            )
        except KeyRejected as exc:
            response = error_response(401, str(exc), **{"WWW-Authenticate": BEARER_CHALLENGE})
            await response(scope, receive, send)
            return
        except (OperationalError, PoolTimeout):
            response = error_response(
                503, "the database is unavailable; retry shortly", code="database_unavailable"
            )
            await response(scope, receive, send)
            return
        scope.setdefault("state", {})["caller"] = caller  # the tools use it: the key is checked once
        app = self.agent_app if caller.writer else self.analyst_app
        await app(scope, receive, send)


def mount_mcp(app: FastAPI, agent_server: MCPServer, analyst_server: MCPServer, sessions: Sessions) -> None:
    """Serve the MCP servers' streamable HTTP transport at /mcp (stateless: each call stands alone)."""
    # Every request needs a bearer key, which a page in a browser cannot send: the SDK's DNS-rebinding guard
    # (which refuses any Host but localhost) would only stop a reverse proxy.
    apps = [
        server.streamable_http_app(
            streamable_http_path="/mcp",
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )  # fmt: skip
        for server in (agent_server, analyst_server)
    ]
    endpoints = [next(r for r in mcp_app.routes if isinstance(r, Route)).app for mcp_app in apps]
    route = next(r for r in apps[0].routes if isinstance(r, Route))
    route.app = McpEndpoint(endpoints[0], endpoints[1], sessions)
    app.router.routes.append(route)
