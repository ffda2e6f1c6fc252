"""Every error the service answers, as {"error": {"code", "message", "field"}} with the HTTP status it means.

400 a body that is not JSON, or no X-Namespace for a key with several namespaces; 401 no, unknown, revoked or
expired key; 403 a key whose role may not do this (an analyst writing, a namespace not granted, another
agent's entry); 404 nothing with that id in the key's namespace (or visible to the request's agent); 409 a
name already taken (the message names the entry to PATCH instead); 413 a body over
STRATAFLOW_API_MAX_BODY_BYTES; 422 a field the library refuses, named in `field`; 429 the key's rate limit,
with Retry-After; 503 the database unreachable.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException

from models.messages import REASONS
from strataflow.db.engine import WorkDeadline
from strataflow.db.roles import AccessError
from strataflow.memory.api import MemoryConflict, MemoryForbidden, MemoryNotFound
from strataflow.service.keys import KeyRejected, NamespaceRequired
from strataflow.service.schemas import UNION_TAGS
from strataflow.service.session import Busy

logger = logging.getLogger(__name__)
BEARER_CHALLENGE = 'Bearer realm="strataflow"'

STATUS_CODES = {
    400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
    409: "conflict", 413: "body_too_large", 415: "unsupported_media_type", 422: "invalid_value",
    429: "rate_limited", 503: "unavailable",
}  # fmt: skip


class ErrorDetail(BaseModel):
    code: str = Field(description="short machine-readable code, e.g. not_found, invalid_value")
    message: str = Field(description="what went wrong, in a sentence")
    field: str | None = Field(None, description="the request field the error is about, dotted (e.g. 0.role)")


class ErrorBody(BaseModel):
    error: ErrorDetail


class ApiError(Exception):
    """An error with its HTTP status, raised by the service's own checks."""

    def __init__(self, status: int, message: str, field: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.field = status, message, field
        self.code = code or STATUS_CODES.get(status, "error")
        self.headers: dict[str, str] = {}


class BodyTooLarge(Exception):
    """The request body is over the configured limit."""


def error_response(
    status: int, message: str, field: str | None = None, code: str | None = None, **headers: str
) -> JSONResponse:
    # An error can quote what the client sent (a key, a value): never a NUL, which the document excludes.
    message, field = message.replace("\x00", "\\u0000"), field and field.replace("\x00", "\\u0000")
    detail = ErrorDetail(code=code or STATUS_CODES.get(status, "error"), message=message, field=field)
    return JSONResponse(ErrorBody(error=detail).model_dump(), status_code=status, headers=headers or None)


# What any authenticated route may answer besides its success (each with the error body, JSON).
ROUTE_ERRORS = (400, 401, 403, 404, 409, 413, 422, 429, 503)
ERROR_MEANINGS = {
    400: "the body is not JSON, or X-Namespace is missing for a key with several namespaces",
    401: "no API key, or one that is unknown, revoked or expired (WWW-Authenticate: Bearer)",
    403: "the key's role or agent may not do this (an analyst writing, a namespace not granted, another "
    "agent's entry)",
    404: "nothing with that id the key may see",
    409: "a name already taken",
    413: "the body is over STRATAFLOW_API_MAX_BODY_BYTES",
    422: "a field the service refuses, named in error.field",
    429: "the rate limit (Retry-After says when to retry)",
    503: "the database is unavailable; retry shortly",
}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` for a route: each status (all of ROUTE_ERRORS by default) with the error body."""
    return {
        status: {
            "model": ErrorBody,
            "description": ERROR_MEANINGS.get(status, STATUS_CODES.get(status, "error")),
        }
        for status in statuses or ROUTE_ERRORS
    }


def _validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    first = errors[0] if errors else {"loc": (), "msg": "invalid request", "type": "value_error"}
    if first.get("type") == "json_invalid":
        return error_response(400, f"the body is not valid JSON: {first.get('msg')}", code="invalid_json")
    loc = [str(part) for part in first.get("loc", ())]
    message_body = len(loc) > 1 and loc[0] == "body" and loc[1] in UNION_TAGS  # POST /v1/messages
    profile_body = (
        len(loc) > 2 and loc[:2] == ["body", "content"] and request.url.path.startswith("/v1/profiles/")
    )
    loc = [part for index, part in enumerate(loc) if not (index == 1 and (message_body or profile_body))]
    field = ".".join(loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc) or None
    code = _message_code(first.get("type", ""), field or "") if message_body else None
    shown = repr(first.get("input"))
    got = (
        ""
        if first.get("type") == "missing"
        else f" (got {shown if len(shown) <= 80 else shown[:77] + '...'})"
    )
    if request.url.path.startswith("/mem0/") and first.get("type") == "extra_forbidden":  # never ignored
        return error_response(
            400, f"{field}: unknown field (not part of this request)", field, "unknown_field"
        )
    if request.url.path.startswith("/mem0/") and (field or "").startswith("filters"):  # mem0's filters
        return error_response(
            400, f"{field}: not supported: {first.get('msg')}{got}", field, "unsupported_filter"
        )
    return error_response(422, f"{field or 'request'}: {first.get('msg')}{got}", field=field, code=code)


def _message_code(error_type: str, field: str) -> str:
    """The batch ingest's reason for a message field (models.messages.REASONS): the same codes either way."""
    if field.endswith("role") and error_type == "literal_error":
        return "unknown_role"
    if field.endswith("created_at"):
        return "bad_timestamp"
    return REASONS.get(error_type, "invalid_value")


def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    if isinstance(exc.__cause__, BodyTooLarge):  # FastAPI wraps errors while it reads the body
        return _body_too_large(request, exc.__cause__)
    message = str(exc.detail) if exc.detail else STATUS_CODES.get(exc.status_code, "error")
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = allowed_methods(request) or headers.get("Allow", "")
    return error_response(exc.status_code, message, **headers)


METHOD_ORDER = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(request: Request) -> str:
    """The methods the OpenAPI document gives the path (its most specific template: /v1/memories/search
    over /v1/memories/{item_id}); a path can have one route per method, and Starlette's own 405 names only
    the first route's. A path outside the document keeps Starlette's answer."""
    paths = request.app.openapi().get("paths", {})
    segments = request.url.path.rstrip("/").split("/")
    best: tuple[int, list[str]] | None = None
    for template, operations in paths.items():
        parts = template.rstrip("/").split("/")
        if len(parts) != len(segments):
            continue
        if all(
            part.startswith("{") or part == segment for part, segment in zip(parts, segments, strict=True)
        ):
            literal = sum(not part.startswith("{") for part in parts)
            if best is None or literal > best[0]:
                best = (literal, [method.upper() for method in operations])
    if best is None:
        return ""
    return ", ".join(sorted(best[1], key=lambda m: (*METHOD_ORDER, m).index(m)))


def _api(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.message, exc.field, exc.code, **exc.headers)


def _key_rejected(_: Request, exc: Exception) -> JSONResponse:
    return error_response(401, str(exc), **{"WWW-Authenticate": BEARER_CHALLENGE})


def _value(_: Request, exc: Exception) -> JSONResponse:
    return error_response(422, str(exc), getattr(exc, "field", None) or getattr(exc, "path", None))


def _database(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, DBAPIError | PoolTimeout)
    sqlstate = getattr(getattr(exc, "orig", None), "sqlstate", None) or ""
    if sqlstate == "42501":  # insufficient_privilege: the key's role may not do this
        return error_response(403, "the key's role may not do this")
    if sqlstate.startswith("22"):  # data exception: a value PostgreSQL cannot take
        return error_response(
            422, f"a value cannot be stored: {str(getattr(exc, 'orig', exc)).splitlines()[0]}"
        )
    if sqlstate == "23505":
        return error_response(409, "that already exists")
    if sqlstate == "57014":  # query_canceled: the statement_timeout of a scan's or heavy request's deadline
        return error_response(
            422, "this request's work ran past its time limit (STRATAFLOW_API_SCAN_MAX_S or "
            "STRATAFLOW_API_HEAVY_MAX_S): ask for less at once or split it", code="too_much_work",
        )  # fmt: skip
    if isinstance(exc, OperationalError | PoolTimeout):
        logger.warning("database unavailable: %s", exc)
        return error_response(503, "the database is unavailable; retry shortly", code="database_unavailable")
    logger.exception("database error", exc_info=exc)
    return error_response(500, "internal error", code="internal_error")


def _body_too_large(request: Request, _: Exception) -> JSONResponse:
    limit = request.app.state.settings.api_max_body_bytes
    return error_response(413, f"the request body is over {limit} bytes (STRATAFLOW_API_MAX_BODY_BYTES)")


def _internal(_: Request, exc: Exception) -> JSONResponse:
    logger.exception("unhandled error", exc_info=exc)
    return error_response(500, "internal error", code="internal_error")


def _busy(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Busy)
    return error_response(429, str(exc), **{"Retry-After": str(math.ceil(exc.wait_s))})


def _conflict(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, MemoryConflict)
    return error_response(409, f"{exc} (PATCH /v1/memories/{exc.item_id})")


def _status(status: int, code: str | None = None) -> Callable[[Request, Exception], JSONResponse]:
    def handler(_: Request, exc: Exception) -> JSONResponse:
        return error_response(status, str(exc), getattr(exc, "field", None), code)

    return handler


HANDLERS: dict[type[Exception], Callable[[Request, Exception], JSONResponse]] = {
    RequestValidationError: _validation,
    HTTPException: _http,
    ApiError: _api,
    KeyRejected: _key_rejected,
    NamespaceRequired: _status(400, "namespace_required"),
    AccessError: _status(403),
    MemoryForbidden: _status(403),
    MemoryNotFound: _status(404),
    MemoryConflict: _conflict,
    ValueError: _value,
    DBAPIError: _database,
    PoolTimeout: _database,
    BodyTooLarge: _body_too_large,
    WorkDeadline: _status(422, "too_much_work"),
    Busy: _busy,
    Exception: _internal,
}


def install(app: FastAPI) -> None:
    """Register every handler (FastAPI picks the most specific class of an exception)."""
    for exc_class, handler in HANDLERS.items():
        app.add_exception_handler(exc_class, handler)
