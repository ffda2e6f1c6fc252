"""GET|POST /v1/context (seed 001 getContextForPrompt, seed 003 prefetch): the memory block for one query."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.responses import PlainTextResponse, Response
from sqlalchemy import Connection

from strataflow.config import Settings
from strataflow.retrieval.context import build_context
from strataflow.service.deps import CallerDep, DbDep, SettingsDep
from strataflow.service.errors import error_responses
from strataflow.service.keys import Caller
from strataflow.service.schemas import ContextParams

router = APIRouter(prefix="/v1/context", tags=["context"])

RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "the context block: text (default) or JSON pieces; an empty body when nothing matched",
        "content": {"text/plain": {}, "application/json": {}},
    },
    **error_responses(),
}


@router.get("", response_class=PlainTextResponse, responses=RESPONSES)
def get_context(
    params: Annotated[ContextParams, Query()], db: DbDep, caller: CallerDep, settings: SettingsDep
) -> Response:
    """The memory an agent should see for `query` about `subject`, chosen by intent within `budget` tokens."""
    return _context(params, db, caller, settings)


@router.post("", response_class=PlainTextResponse, responses=RESPONSES)
def post_context(params: ContextParams, db: DbDep, caller: CallerDep, settings: SettingsDep) -> Response:
    """The same as GET, with the parameters as a JSON body (long queries)."""
    return _context(params, db, caller, settings)


def _context(params: ContextParams, db: Connection, caller: Caller, settings: Settings) -> Response:
    result = build_context(
        db, settings, caller.namespace, params.subject, params.query, params.budget, params.format,
        intent=params.intent, profile=params.profile, agent_id=caller.agent_for(params.agent),
        threshold=params.threshold,
    )  # fmt: skip
    media = "application/json" if params.format == "json" else "text/plain; charset=utf-8"
    return Response(result.text, media_type=media)
