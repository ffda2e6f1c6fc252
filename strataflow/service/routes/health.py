"""Liveness and readiness, without a key: /healthz (the process is up), /readyz (database and migrations)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

from strataflow.service.readiness import Readiness, readiness

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=dict[str, str])
async def healthz() -> dict[str, str]:
    """200 while the process serves requests."""
    return {"status": "ok"}


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
def readyz(request: Request, response: Response) -> Readiness:
    """200 once the database is reachable and every migration is applied, else 503 saying what is missing."""
    state = readiness(request.app.state.engine)
    response.status_code = 200 if state.ready else 503
    return state
