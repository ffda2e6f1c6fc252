"""Every route declares its work on itself (deps.work): nothing is kept in a list beside the routes. The test
reads the app's real routes: each route that takes a key declares an operation, each one that takes a query
text, a filter or a batch of operations is a scan or heavy (a turn and a deadline), and the spans name the
operation each route declared."""

from __future__ import annotations

from typing import Any

from fastapi.routing import APIRoute
from pydantic import BaseModel
from sqlalchemy import Engine

from strataflow.config import Settings
from strataflow.service.deps import BEARER, declared
from strataflow.service.mem0_deps import TOKEN

# A request field that makes the work grow with what is asked: a query text is encoded and ranked, a filter
# fans out, a batch runs many operations.
GROWING = {"query", "filters", "ops"}


def _calls(dependant: Any) -> set[Any]:
    found = {dependant.call}
    for sub in dependant.dependencies:
        found |= _calls(sub)
    return found


def _fields(route: Any) -> set[str]:
    names = {param.alias for param in route.dependant.query_params}
    body = route.body_field
    annotation = getattr(getattr(body, "field_info", None), "annotation", None)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        names |= set(annotation.model_fields)
    return names


def test_every_keyed_route_declares_its_work_and_growing_work_takes_a_turn(
    settings: Settings, engine: Engine
) -> None:
    from strataflow.service.app import create_app

    app = create_app(settings)
    # the routes as served (FastAPI >= 0.150 keeps included routers; a request's scope names the original)
    contexts = [
        c
        for included in app.routes
        if hasattr(included, "effective_route_contexts")
        for c in included.effective_route_contexts()
        if isinstance(c.original_route, APIRoute)
    ]
    keyed = [c for c in contexts if c.dependant is not None and {BEARER, TOKEN} & _calls(c.dependant)]
    assert len(keyed) > 30, [c.path for c in keyed]
    undeclared = [f"{sorted(c.methods)} {c.path}" for c in keyed if declared(c.original_route) is None]
    assert not undeclared, f"routes without deps.work(...): {undeclared}"
    weights = {
        (method, c.path): getattr(declared(c.original_route), "weight", None)
        for c in keyed
        for method in c.methods
    }
    light = [
        f"{c.methods} {c.path}"
        for c in keyed
        if _fields(c) & GROWING and weights[(min(c.methods), c.path)] == "light"
    ]
    assert not light, f"routes taking a query, filters or ops declared light: {light}"
    assert weights[("GET", "/v1/context")] == weights[("POST", "/v1/context")] == "scan"
    assert weights[("POST", "/mem0/v3/memories/search/")] == weights[("POST", "/v1/store/batch")] == "heavy"
    assert weights[("GET", "/v1/memories/{item_id:int}")] == "light"
