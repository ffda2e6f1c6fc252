"""FastAPI dependencies, declared as types: a route names what it needs in its signature and nothing else.

`DbDep` is the request's transaction, already running as the API key's role (row-level security filters every
read and checks every write); `WriterDep` is the same for routes that write, refused (403) for a key whose
role is an analyst; `CallerDep` says who calls and in which namespace; `LlmSlotDep` (listed before the
session) waits for one of the key's LLM slots before the route takes a connection. The transaction commits
when the route returns, before the response is sent, so a client that reads after a write sees it.
`WriterOpenerDep` is for a route that calls the model: the key is checked at once (401/403 before any model
call), and the route opens short transactions itself, none held while the model answers.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Annotated

from fastapi import Depends, Header, Request
from fastapi.exceptions import RequestValidationError
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import TypeAdapter, ValidationError
from sqlalchemy import Connection

from strataflow.config import Settings
from strataflow.service.errors import ApiError
from strataflow.service.keys import Caller
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


def open_session(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
    x_namespace: XNamespace = None,
) -> Iterator[tuple[Connection, Caller]]:
    sessions: Sessions = request.app.state.sessions
    key = credentials.credentials if credentials is not None else None
    with sessions.open(key, x_namespace) as session:
        yield session


Opener = Callable[[], AbstractContextManager[Connection]]


def writer_opener(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
    x_namespace: XNamespace = None,
) -> tuple[Opener, Caller]:
    """(opener of the request's write transactions, caller): the key is accepted and may write, now."""
    key = credentials.credentials if credentials is not None else None
    return opener_for(request.app.state.sessions, key, x_namespace)


def opener_for(sessions: Sessions, key: str | None, x_namespace: str | None) -> tuple[Opener, Caller]:
    """writer_opener for a key however the route reads it (Bearer, mem0's Token)."""
    caller = sessions.authenticate(key).in_namespace(x_namespace)
    require_writer(caller)

    @contextmanager
    def opener() -> Iterator[Connection]:
        with sessions.open(key, x_namespace) as (conn, now):
            require_writer(now)
            yield conn

    return opener, caller


async def llm_slot(request: Request) -> AsyncIterator[None]:
    sessions: Sessions = request.app.state.sessions
    async with sessions.llm_slot(bearer_token(request.headers.get("authorization"))):
        yield


Session = Annotated[tuple[Connection, Caller], Depends(open_session, scope="function")]


async def get_caller(session: Session) -> Caller:
    return session[1]


async def get_db(session: Session) -> Connection:
    return session[0]


def require_writer(caller: Caller) -> None:
    """403 for a key whose role may only read (an analyst's): every write of every surface checks it."""
    if caller.kind != "agent":
        raise ApiError(403, f"key {caller.key_name!r} has the {caller.kind} role {caller.role!r}: read-only")


async def get_writer(session: Session) -> Connection:
    conn, caller = session
    require_writer(caller)
    return conn


SettingsDep = Annotated[Settings, Depends(get_settings)]
LlmSlotDep = Annotated[None, Depends(llm_slot, scope="function")]
WriterOpenerDep = Annotated[tuple[Opener, Caller], Depends(writer_opener)]
CallerDep = Annotated[Caller, Depends(get_caller)]
DbDep = Annotated[Connection, Depends(get_db)]
WriterDep = Annotated[Connection, Depends(get_writer)]
