"""The request side of the mem0-compatible API (strataflow.service.routes.mem0): the session of a request
(`Authorization: Token KEY` as mem0's client sends it, or `Bearer KEY`; the same Sessions as every route, so
the same roles, namespaces and rate limit), who may write, and the filters of a request (parsed by
strataflow.adapters.mem0_filters). No shapes (strataflow.service.mem0_shapes) and no storage
(strataflow.adapters.mem0)."""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator, Mapping
from typing import Annotated, Any

from fastapi import Depends, Path, Query, Request
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from fastapi.security import APIKeyHeader
from sqlalchemy import Connection

from strataflow.adapters.conditions import FilterError, FilterTooLarge
from strataflow.adapters.mem0_filters import Mem0Filter, parse_filters
from strataflow.service.deps import (
    Opener,
    Weight,
    XNamespace,
    acting_of,
    bearer_token,
    identify,
    opener_for,
    request_session,
    sessions_of,
    work,
)
from strataflow.service.errors import ApiError
from strataflow.service.keys import Acting, Caller
from strataflow.service.schemas import Id

# The OpenAPI security scheme of every /mem0 operation (components.securitySchemes.mem0Token); a request
# without a usable key is refused by the session (401), never by FastAPI.
TOKEN = APIKeyHeader(
    name="Authorization",
    auto_error=False,
    scheme_name="mem0Token",
    description="`Token KEY` as mem0's client sends it (or `Bearer KEY`), a key from `strataflow access "
    "create-key NAME --role ROLE [--agent AGENT_ID]`.",
)


def api_key(authorization: str | None) -> str | None:
    """The key of `Authorization: Token KEY` (mem0's client) or `Bearer KEY`."""
    return bearer_token(authorization, ("token", "bearer"))


def mem0_work(operation: str, weight: Weight = "light") -> Any:
    """A /mem0 route's declaration of its work (deps.work), its key read as mem0's client sends it."""
    return work(operation, weight, ("token", "bearer"))


def open_session(
    request: Request,
    authorization: Annotated[str | None, Depends(TOKEN)],
    x_namespace: XNamespace = None,
) -> Iterator[tuple[Connection, Acting]]:
    """The request's transaction as its caller, and who it acts as (deps.acting_of)."""
    with request_session(request, api_key(authorization), x_namespace) as (conn, caller):
        yield conn, acting_of(request, caller)


async def open_writer(
    request: Request,
    authorization: Annotated[str | None, Depends(TOKEN)],
    x_namespace: XNamespace = None,
) -> tuple[Opener, Acting]:
    """(opener of the request's write transactions, who it acts as), for a route that embeds before it
    writes: the caller may write, now, and no connection is held until the route opens one."""
    caller = await identify(request, api_key(authorization), x_namespace)
    acting = acting_of(request, caller)
    acting.require_writer()
    return opener_for(sessions_of(request), caller), acting


Session = Annotated[tuple[Connection, Acting], Depends(open_session, scope="function")]
WriterOpener = Annotated[tuple[Opener, Acting], Depends(open_writer)]
AgentParam = Annotated[Id | None, Query(description="act as this agent (default: the key's own)")]
MemoryId = Annotated[str, Path(max_length=40, description="the memory id")]


def known_query(request: Request) -> None:
    """Every /mem0 route: a query parameter the route does not take, or one given twice, is refused (400
    naming it), never ignored (a misspelled `userid` must not turn a scoped delete into an unscoped one)."""
    route = request.scope.get("route")
    if not isinstance(route, APIRoute):
        return
    allowed = _query_names(route.dependant)
    unknown = sorted(set(request.query_params) - allowed)
    if unknown:
        takes = ", ".join(sorted(allowed)) or "none"
        raise ApiError(
            400, f"unknown query parameter {', '.join(map(repr, unknown))} (this route takes: {takes})",
            unknown[0], code="unknown_field",
        )  # fmt: skip
    repeated = sorted({name for name, _ in request.query_params.multi_items()
                       if len(request.query_params.getlist(name)) > 1})  # fmt: skip
    if repeated:  # one value each: a second run_id must not be dropped silently (or pick the one deleted)
        raise ApiError(
            400, f"query parameter {repeated[0]!r} given more than once", repeated[0], code="repeated_field"
        )


def _query_names(dependant: Dependant) -> set[str]:
    names = {param.alias for param in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names


def query_filters(raw: str | None) -> dict[str, Any] | None:
    """The `filters` query parameter of a delete: a JSON object, or the Python dict text mem0ai 2.2.1's
    client sends (`params={"filters": {...}}` becomes str(dict)); 400 otherwise."""
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        try:
            value = ast.literal_eval(raw)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            value = None
    if not isinstance(value, Mapping):
        raise ApiError(
            400, 'filters: an object such as {"user_id": "alice"}', "filters", code="invalid_filter"
        )
    return dict(value)


def namespace_writer(caller: Caller, what: str) -> None:
    """A request that changes every agent's memories: a writer key bound to no agent."""
    caller.require_writer()
    if caller.agent is not None:
        raise ApiError(403, f"{what} needs a key that may write the whole namespace, not an agent's key")


def item_id_of(memory_id: str) -> int:
    if not (memory_id.isascii() and memory_id.isdigit()) or len(memory_id) > 18:  # '³'.isdigit() is true
        raise ApiError(404, f"no memory {memory_id!r}", "memory_id")
    return int(memory_id)


def checked_filter(filters: Mapping[str, Any] | None, caller: Caller, **top_level: str | None) -> Mem0Filter:
    """The request's filter (400 naming an unsupported part, 422 naming the bound of a filter too large);
    403 when it names an agent the key may not act as."""
    try:
        parsed = parse_filters(filters, **top_level)
    except FilterTooLarge as exc:
        raise ApiError(422, str(exc), exc.where, code="filter_too_large") from None
    except FilterError as exc:
        raise ApiError(400, str(exc), exc.where, code="unsupported_filter") from None
    for agent in sorted(parsed.agents()):
        caller.agent_for(agent)
    return parsed
