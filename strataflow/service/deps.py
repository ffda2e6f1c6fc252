"""FastAPI dependencies, declared as types: a route names what it needs in its signature and nothing else.

The caller is identified once per request: its key (`Authorization: Bearer KEY`; mem0's `Token KEY` under
/mem0: strataflow.service.mem0_deps), the namespace it picks (X-Namespace) and its role's rights give a
`Caller`, kept on the request (`request.state.caller`) for every later dependency; `ActingDep` adds the agent
the request acts as (keys.Acting: the key's own, or the `agent` / `agent_id` the request names in its query
or its JSON body, refused with 403 when the key is bound to another), decided once; `WritingDep` is the same
for a route that writes (403 for a key whose role only reads). `DbDep` is the request's transaction, already
running as the key's role (row-level security filters every read and checks every write); it commits when
the route returns, before the response is sent, so a client that reads after a write sees it. `OpenerDep` is
for a route that embeds or calls the model first: the caller is identified and may write, now, and the
route opens short transactions itself, none held while it encodes or the model answers. `LlmSlotDep` (listed
before the rest) waits for one of the key's LLM slots.

Every route declares its work (`work(operation, weight)` in its `dependencies`): the memory operation its
spans are named by and its weight, `light`, `scan` (encodes a query, ranks) or `heavy` (grows with what it
asks). A scan or heavy route takes a fair turn (strataflow.service.turns) before its first connection and
works within its time limit from the request's arrival (Sessions.turn); `declared(route)` reads it back, so
the metrics, the spans and the tests use the routes' own declarations, never a list kept by hand.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Annotated, Any, Literal

import anyio
from fastapi import Depends, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.params import Depends as DependsParam
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import TypeAdapter, ValidationError
from sqlalchemy import Connection

from strataflow.config import Settings
from strataflow.service.keys import Acting, Caller
from strataflow.service.session import Sessions

# The OpenAPI security scheme of every /v1 route (components.securitySchemes.bearerAuth); a request without a
# usable key is refused by the session (KeyRejected, 401 with WWW-Authenticate: Bearer), never by FastAPI.
BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="bearerAuth",
    bearerFormat="sf_<8 hex>_<43 characters>",
    description="An API key from `strataflow access create-key NAME --role ROLE [--agent AGENT_ID]`.",
)


_BODY_ADAPTERS: dict[int, TypeAdapter[object]] = {}


async def strict_json_body(request: Request) -> None:
    """A JSON body must have exactly the types the OpenAPI document gives: validated again in pydantic's
    strict JSON mode (no 0 for false, "10" for 10 or 0 for a date-time), before any database work. FastAPI's
    own validation is lax; this makes the document and the service agree on every body (422 naming the
    field)."""
    route = request.scope.get("route")
    field = getattr(route, "body_field", None)
    if field is None:
        return
    raw = await request.body()  # FastAPI has read it already: cached
    if not raw:
        return
    try:
        # JSON Schema counts 27.0 as an integer; strict pydantic does not: whole floats are read as ints.
        value = json.loads(raw, parse_float=_json_number)
    except ValueError:
        return  # FastAPI answers a body that is not JSON (400)
    request.state.json_body = value  # named_agent reads it
    nul = _nul_path(value, ())
    if nul is not None:
        raise RequestValidationError(
            [
                {
                    "type": "string_pattern_mismatch",
                    "loc": ("body", *nul),
                    "input": None,
                    "msg": "a NUL character (U+0000) cannot be stored",
                }
            ]  # fmt: skip
        )
    adapter = _BODY_ADAPTERS.get(id(route))
    if adapter is None:
        adapter = _BODY_ADAPTERS[id(route)] = TypeAdapter(field.field_info.annotation)
    try:
        adapter.validate_json(json.dumps(value), strict=True)
    except ValidationError as exc:
        raise RequestValidationError(
            [{**error, "loc": ("body", *error["loc"])} for error in exc.errors(include_url=False)]
        ) from None


def _json_number(text: str) -> float | int:
    number = float(text)
    return int(number) if number.is_integer() else number


def _nul_path(value: object, path: tuple[str | int, ...]) -> tuple[str | int, ...] | None:
    """Where a JSON value holds a NUL in a string or a key (PostgreSQL cannot store one), or None."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            found = (*path, key) if "\x00" in key else _nul_path(item, (*path, key))
            if found is not None:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _nul_path(item, (*path, index))
            if found is not None:
                return found
    return None


def bearer_token(authorization: str | None, schemes: tuple[str, ...] = ("bearer",)) -> str | None:
    """The key of an `Authorization: Bearer KEY` header, or of another of the given (lower-case) schemes;
    None when there is none."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    return token.strip() if scheme.lower() in schemes and token.strip() else None


async def get_settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


# The X-Namespace header of every authenticated request (a key whose role has several namespaces picks one).
XNamespace = Annotated[
    str | None, Header(max_length=512, description="the namespace to use, when the key's role has several")
]
Weight = Literal["light", "scan", "heavy"]
AGENT_FIELDS = ("agent", "agent_id")  # where a request names the agent it acts as (query or JSON body)


def sessions_of(request: Request) -> Sessions:
    sessions: Sessions = request.app.state.sessions
    return sessions


def known_caller(request: Request) -> Caller | None:
    """The request's caller when an earlier dependency has identified it."""
    caller: Caller | None = getattr(request.state, "caller", None)
    return caller


async def identify(request: Request, key: str | None, namespace: str | None) -> Caller:
    """The request's caller, identified once (a short transaction of its own the first time)."""
    caller = known_caller(request)
    if caller is None:
        caller = await anyio.to_thread.run_sync(sessions_of(request).identify, key, namespace)
        request.state.caller = caller
    return caller


@contextmanager
def request_session(
    request: Request, key: str | None, namespace: str | None
) -> Iterator[tuple[Connection, Caller]]:
    """The request's transaction as its caller (identified inside it, unless it is known already)."""
    with sessions_of(request).open(key, namespace, known_caller(request)) as (conn, caller):
        request.state.caller = caller
        yield conn, caller


def named_agent(request: Request) -> str | None:
    """The agent a request names: an `agent` or `agent_id` query parameter, else that field of its JSON
    body as strict_json_body read it (the route's own model validates it)."""
    for name in AGENT_FIELDS:
        value = request.query_params.get(name)
        if value:
            return value
    body: Any = getattr(request.state, "json_body", None)
    if isinstance(body, dict):
        for name in AGENT_FIELDS:
            value = body.get(name)
            if isinstance(value, str) and value:
                return value
    return None


def acting_of(request: Request, caller: Caller) -> Acting:
    """Who the request acts as: decided once per request (keys.Acting)."""
    acting: Acting | None = getattr(request.state, "acting", None)
    if acting is None:
        acting = request.state.acting = caller.acting(named_agent(request))
    return acting


def opener_for(sessions: Sessions, caller: Caller) -> Opener:
    """Short write transactions of an identified writer (none held between them)."""

    @contextmanager
    def opener() -> Iterator[Connection]:
        with sessions.open(None, None, caller) as (conn, _):
            yield conn

    return opener


class Work:
    """What a route does, declared in its `dependencies` (work()): the memory operation its spans are named
    by and its weight. A scan or heavy route identifies its caller, then waits for a turn and works within
    its time limit (Sessions.turn); `schemes` are the Authorization schemes of the route's key."""

    def __init__(self, operation: str, weight: Weight, schemes: tuple[str, ...]) -> None:
        self.operation, self.weight, self.schemes = operation, weight, schemes

    async def __call__(self, request: Request) -> AsyncIterator[None]:
        if self.weight == "light":
            yield
            return
        key = bearer_token(request.headers.get("authorization"), self.schemes)
        caller = await identify(request, key, request.headers.get("x-namespace"))
        arrived = getattr(request.state, "arrived", None) or time.monotonic()
        async with sessions_of(request).turn(caller, self.weight, arrived):
            yield


def work(operation: str, weight: Weight = "light", schemes: tuple[str, ...] = ("bearer",)) -> DependsParam:
    """A route's declaration of its work (Work), for its `dependencies=[...]`; the turn is given back when
    the route returns, before its answer is sent to a client that may read it slowly."""
    return Depends(Work(operation, weight, schemes), scope="function")


def declared(route: Any) -> Work | None:
    """The work a route declared (None: a route that declares none, e.g. a health check or /mcp)."""
    if not isinstance(route, APIRoute):
        return None
    found = [dep.call for dep in route.dependant.dependencies if isinstance(dep.call, Work)]
    return found[0] if found else None


def open_session(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
    x_namespace: XNamespace = None,
) -> Iterator[tuple[Connection, Caller]]:
    with request_session(request, credentials.credentials if credentials else None, x_namespace) as session:
        yield session


Opener = Callable[[], AbstractContextManager[Connection]]


async def writer_opener(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
    x_namespace: XNamespace = None,
) -> tuple[Opener, Acting]:
    """(opener of the request's write transactions, who it acts as): the caller may write, now."""
    caller = await identify(request, credentials.credentials if credentials else None, x_namespace)
    acting = acting_of(request, caller)
    acting.require_writer()
    return opener_for(sessions_of(request), caller), acting


async def llm_slot(request: Request) -> AsyncIterator[None]:
    async with sessions_of(request).llm_slot(bearer_token(request.headers.get("authorization"))):
        yield


Session = Annotated[tuple[Connection, Caller], Depends(open_session, scope="function")]


async def get_db(session: Session) -> Connection:
    return session[0]


async def acting(request: Request, session: Session) -> Acting:
    return acting_of(request, session[1])


async def writing(request: Request, session: Session) -> Acting:
    found = acting_of(request, session[1])
    found.require_writer()
    return found


SettingsDep = Annotated[Settings, Depends(get_settings)]
LlmSlotDep = Annotated[None, Depends(llm_slot, scope="function")]
OpenerDep = Annotated[tuple[Opener, Acting], Depends(writer_opener)]
ActingDep = Annotated[Acting, Depends(acting)]
WritingDep = Annotated[Acting, Depends(writing)]
DbDep = Annotated[Connection, Depends(get_db)]
