"""GET|POST /v1/context (seed 001 getContextForPrompt, seed 003 prefetch): the memory block for one query."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import PlainTextResponse, Response
from sqlalchemy import Connection

from strataflow.config import Settings
from strataflow.retrieval.context import build_context
from strataflow.service.deps import ActingDep, DbDep, SettingsDep, work
from strataflow.service.errors import error_responses
from strataflow.service.keys import Acting
from strataflow.service.schemas import ContextParams

router = APIRouter(prefix="/v1/context", tags=["context"])

RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "the context block: text (default) or JSON pieces; an empty body when nothing matched",
        "content": {"text/plain": {}, "application/json": {}},
    },
    **error_responses(),
}


SCAN = [work("context", "scan")]


@router.get("", response_class=PlainTextResponse, responses=RESPONSES, dependencies=SCAN)
def get_context(
    params: Annotated[ContextParams, Query()], db: DbDep, acting: ActingDep, settings: SettingsDep
) -> Response:
    """The memory an agent should see for `query` about `subject`, chosen by intent within `budget` tokens."""
    return _context(params, db, acting, settings)


@router.post("", response_class=PlainTextResponse, responses=RESPONSES, dependencies=SCAN)
def post_context(params: ContextParams, db: DbDep, acting: ActingDep, settings: SettingsDep) -> Response:
    """The same as GET, with the parameters as a JSON body."""
    return _context(params, db, acting, settings)


def _context(params: ContextParams, db: Connection, acting: Acting, settings: Settings) -> Response:
    result = build_context(
        db, settings, acting.namespace, params.subject, params.query, params.budget, params.format,
        intent=params.intent, profile=params.profile, agent_id=acting.agent, threshold=params.threshold,
    )  # fmt: skip
    media = "application/json" if params.format == "json" else "text/plain; charset=utf-8"
    return Response(result.text, media_type=media)
