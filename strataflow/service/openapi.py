"""The OpenAPI document of the service, as outside tools read it: every `$ref` resolves, the bearer key is a
security scheme (`bearerAuth`) of every /v1 operation, and every schema says exactly what the service takes.

FastAPI builds the document from the routes and models; this module finishes it once an hour (the write
window moves):

- a message's `created_at` gets the days and hours of the online write window as its pattern: a time the
  pattern allows lies inside the window at whatever UTC offset it carries (or, without one, in
  STRATAFLOW_TIMEZONE), with an hour to spare; the service checks the window itself too, to the second;
- every error status answers application/json with the error body ({"error": {code, message, field}});
- every string without a pattern, a format or an enum gets `^[^\\x00]*$` (PostgreSQL stores no NUL, so the
  service refuses one), an object's free keys get it too, and an object with `patternProperties` allows no
  other keys;
- mem0's `filters` refer to the grammar's own schema (strataflow.service.mem0_filter_schema's components);
- query parameters of which a route needs at least one (its `openapi_extra` names them under ONE_OF_QUERY)
  become one exploded form object (OpenAPI's way to say it): the same `?user_id=...&app_id=...` on the wire.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from models.messages import NO_NUL
from strataflow.config import Settings
from strataflow.ingest.online import write_window
from strataflow.service import mem0_filter_schema

ERROR_BODY = "#/components/schemas/ErrorBody"
HOUR = timedelta(hours=1)
MARGIN = HOUR  # the document is made once an hour
TIME_REST = r":[0-5][0-9](:[0-5][0-9](\.[0-9]{1,6})?)?"
OFFSET_HOURS = range(-14, 15)  # the suffixes the service parses: Z, -14:00 ... +14:00
ONE_OF_QUERY = "x-strataflow-one-of-query"


def created_at_pattern(settings: Settings, now: datetime | None = None) -> str:
    """The pattern of a created_at inside the write window (module docstring): whole days where every hour
    and offset fits, hour by hour (with the offsets that fit) on the days at the window's edges."""
    start, end = write_window(settings, now)
    start, end = start + MARGIN, end - MARGIN
    naive = _zone_offsets(settings, start, end)
    whole: list[str] = []
    partial: list[str] = []
    day = (start - timedelta(days=1)).date()
    while day <= (end + timedelta(days=1)).date():
        hours = {hour: _fitting_offsets(day, hour, start, end) for hour in range(24)}
        if all(len(fits) == len(OFFSET_HOURS) for fits in hours.values()) and _naive_fits(
            day, naive, start, end
        ):
            whole.append(day.isoformat())
        else:
            for hour, fits in hours.items():
                suffix = _suffix(fits, _naive_hour_fits(day, hour, naive, start, end))
                if suffix is not None:
                    partial.append(f"{day.isoformat()}T{hour:02d}{TIME_REST}{suffix}")
        day += timedelta(days=1)
    alternatives = []
    if whole:
        full = _suffix(list(OFFSET_HOURS), True)
        alternatives.append(f"(?:{'|'.join(whole)})T(?:[01][0-9]|2[0-3]){TIME_REST}{full}")
    alternatives.extend(partial)
    return "^(?:" + "|".join(alternatives or ["(?!)"]) + ")$"


def _fitting_offsets(day: date, hour: int, start: datetime, end: datetime) -> list[int]:
    """The offset hours h at which every time of that local hour (offsets h:00 to h:59) lies in [start,
    end]."""
    local = datetime(day.year, day.month, day.day, hour, tzinfo=UTC)
    fits = []
    for offset in OFFSET_HOURS:
        span = [timedelta(hours=offset), timedelta(hours=offset, minutes=59 if offset >= 0 else -59)]
        if offset == 0:  # +00:MM and -00:MM
            span = [timedelta(minutes=-59), timedelta(minutes=59)]
        earliest = local - max(span)
        latest = local + HOUR - min(span)
        if start <= earliest and latest <= end:
            fits.append(offset)
    return fits


def _zone_offsets(settings: Settings, start: datetime, end: datetime) -> tuple[timedelta, timedelta]:
    """The lowest and highest UTC offset of STRATAFLOW_TIMEZONE around the window (a naive time is read in
    it; DST changes it)."""
    offsets = [
        moment.astimezone(settings.tz).utcoffset() or timedelta(0)
        for moment in _hours(start - timedelta(days=2), end + timedelta(days=2))
    ]
    return min(offsets), max(offsets)


def _hours(start: datetime, end: datetime) -> Iterator[datetime]:
    moment = start
    while moment <= end:
        yield moment
        moment += timedelta(hours=6)


def _naive_hour_fits(
    day: date, hour: int, naive: tuple[timedelta, timedelta], start: datetime, end: datetime
) -> bool:
    local = datetime(day.year, day.month, day.day, hour, tzinfo=UTC)
    return start <= local - naive[1] and local + HOUR - naive[0] <= end


def _naive_fits(day: date, naive: tuple[timedelta, timedelta], start: datetime, end: datetime) -> bool:
    return all(_naive_hour_fits(day, hour, naive, start, end) for hour in range(24))


def _suffix(offsets: list[int], naive: bool) -> str | None:
    """The regex of the suffixes for these offset hours (plus no suffix when naive fits); None: none fit."""
    if not offsets and not naive:
        return None
    options = []
    if 0 in offsets:
        options.append("Z")
    signed = {"+": sorted(h for h in offsets if h >= 0), "-": sorted(-h for h in offsets if h <= 0)}
    for sign, hours in signed.items():
        below = [h for h in hours if h < 14]
        if below:
            options.append(f"\\{sign}(?:{'|'.join(f'{h:02d}' for h in below)}):[0-5][0-9]")
        if 14 in hours:
            options.append(f"\\{sign}14:00")
    group = f"(?:{'|'.join(options)})" if options else ""
    if naive:
        return f"{group}?" if group else ""
    return group


def install(app: FastAPI, settings: Settings) -> None:
    """Serve the finished document (made again each hour) as app.openapi()."""
    cache: dict[str, Any] = {}

    def openapi() -> dict[str, Any]:
        now = datetime.now(UTC)
        stamp = now.strftime("%Y-%m-%dT%H")
        if cache.get("stamp") != stamp:
            cache["doc"] = finish(_base(app), settings, now)
            cache["stamp"] = stamp
        app.openapi_schema = cache["doc"]
        doc: dict[str, Any] = cache["doc"]
        return doc

    app.openapi = openapi  # type: ignore[method-assign]


def _base(app: FastAPI) -> dict[str, Any]:
    return get_openapi(
        title=app.title, version=app.version, description=app.description, routes=app.routes,
        tags=app.openapi_tags, servers=app.servers,
    )  # fmt: skip


def finish(doc: dict[str, Any], settings: Settings, now: datetime) -> dict[str, Any]:
    """The document with the created_at window and the NUL-free strings (module docstring)."""
    schemas = doc.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(copy.deepcopy(mem0_filter_schema.COMPONENTS))  # what mem0's `filters` refer to
    message = schemas.get("MessageIn", {}).get("properties", {})
    if "created_at" in message:
        message["created_at"]["pattern"] = created_at_pattern(settings, now)
    for path in doc.get("paths", {}).values():
        for operation in path.values():
            _one_of_query(operation)
            for status, response in operation.get("responses", {}).items():
                if status.isdigit() and int(status) >= 400 and "Readiness" not in json.dumps(response):
                    response["content"] = {"application/json": {"schema": {"$ref": ERROR_BODY}}}
    _walk(doc, mem0_filter_schema.refer)
    _walk(doc, _tighten)
    return doc


def _one_of_query(operation: dict[str, Any]) -> None:
    """The query parameters the operation names under ONE_OF_QUERY as one exploded form object that needs at
    least one of them (module docstring)."""
    names = operation.pop(ONE_OF_QUERY, None)
    if not names:
        return
    chosen = [p for p in operation.get("parameters", []) if p["in"] == "query" and p["name"] in names]
    scope = {
        "name": "scope", "in": "query", "required": True, "style": "form", "explode": True,
        "description": "at least one of " + ", ".join(p["name"] for p in chosen),
        "schema": {
            "type": "object", "minProperties": 1, "additionalProperties": False,
            "properties": {p["name"]: p["schema"] for p in chosen},
        },
    }  # fmt: skip
    kept = [p for p in operation.get("parameters", []) if p not in chosen]
    operation["parameters"] = [*kept, scope]


def _tighten(node: dict[str, Any]) -> None:
    if node.get("type") == "string" and not {"pattern", "format", "enum", "const"} & set(node):
        node["pattern"] = NO_NUL
    if "patternProperties" in node and "additionalProperties" not in node:
        node["additionalProperties"] = False
    if node.get("type") == "object" and node.get("additionalProperties", True) is not False:
        node.setdefault("propertyNames", {"pattern": NO_NUL})  # a JSON key is stored too


def _walk(node: Any, visit: Callable[[dict[str, Any]], None]) -> None:
    if isinstance(node, dict):
        visit(node)
        for value in node.values():
            _walk(value, visit)
    elif isinstance(node, list):
        for value in node:
            _walk(value, visit)
