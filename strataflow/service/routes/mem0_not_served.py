"""The paths of mem0's platform API that strataflow does not serve (feedback, summaries, exports, profiles,
webhooks, projects): each answers 501 naming the feature once the key is checked, never 404, which mem0's
client reads as "memory not found" (a 501 is its MemoryError). They are left out of the OpenAPI document: they
are mem0's client's paths, not strataflow's API, and a contract test (Schemathesis) holds every documented
operation to no server error; docs/integrations.md lists them. Included by strataflow.service.routes.mem0
under /mem0."""

from __future__ import annotations

import inspect
import re
from typing import Annotated, Any

from fastapi import APIRouter, Path

from strataflow.service.errors import error_response
from strataflow.service.mem0_deps import Session, mem0_work

NOT_SERVED = {
    "feedback": "feedback on memories (mem0 platform's POST /v1/feedback/)",
    "summary": "memory summaries (mem0 platform's POST /v1/summary/)",
    "exports": "memory exports (mem0 platform's /v1/exports/: use `strataflow export --namespace NS`)",
    "profiles": "memory profiles (mem0 platform's profiles: strataflow's are GET /v1/profiles/{subject})",
    "webhooks": "webhooks (mem0 platform's /api/v1/webhooks/)",
    "projects": "organizations and projects (mem0 platform's /api/v1/orgs/; a namespace is a project)",
}
NOT_SERVED_ROUTES = (
    ("/v1/feedback/", ["POST"], "feedback"),
    ("/v1/summary/", ["POST"], "summary"),
    ("/v1/exports/", ["POST"], "exports"),
    ("/v1/exports/get/", ["POST"], "exports"),
    ("/v2/entities/user/{entity_id}/profile/", ["GET"], "profiles"),
    ("/v2/profiles/{rest:path}", ["GET", "POST"], "profiles"),
    ("/api/v1/webhooks/{rest:path}", ["GET", "POST", "PUT", "DELETE"], "webhooks"),
    ("/api/v1/orgs/{rest:path}", ["GET", "POST", "PUT", "PATCH", "DELETE"], "projects"),
)
PATH_PARAMETER = re.compile(r"\{(\w+)(?::\w+)?\}")

router = APIRouter(include_in_schema=False)


def _not_served(feature: str, path: str) -> Any:
    def answer(session: Session, **parameters: str) -> Any:
        """A mem0 platform feature strataflow does not serve: 501 naming it (the key is checked first)."""
        return error_response(
            501, f"{NOT_SERVED[feature]} is not served by strataflow's mem0-compatible API",
            code="not_implemented",
        )  # fmt: skip

    # the path's parameters declared (any string): FastAPI passes each one the path names
    declared = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=Annotated[str, Path()])
        for name in PATH_PARAMETER.findall(path)
    ]
    session = inspect.Parameter("session", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Session)
    answer.__signature__ = inspect.Signature([session, *declared])  # type: ignore[attr-defined]
    return answer


for _path, _methods, _feature in NOT_SERVED_ROUTES:
    for _method in _methods:  # one route a method: each operation its own id
        router.add_api_route(
            _path, _not_served(_feature, _path), methods=[_method],
            dependencies=[mem0_work("read")],
            summary=f"not served: {_feature}", name=f"not_served_{_feature}_{_method.lower()}_{_path}",
        )  # fmt: skip
