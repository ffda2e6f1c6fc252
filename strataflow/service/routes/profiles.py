"""/v1/profiles (seed 002): a subject's user and work documents, their content and their status
(strataflow.memory.profiles)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter

from models.profiles import ProfileDocument
from strataflow.memory import profiles
from strataflow.service.deps import CallerDep, DbDep, WriterDep
from strataflow.service.errors import error_responses
from strataflow.service.schemas import ProfileBody, ProfileStatusBody

router = APIRouter(prefix="/v1/profiles", tags=["profiles"])
DocType = Literal["user", "work"]
READ = error_responses(401, 403, 422, 429, 503)
WRITE = error_responses(401, 403, 422, 429, 503)


@router.get("/{subject}", response_model=dict[str, Any], responses=READ)
def get_profiles(subject: str, db: DbDep, caller: CallerDep) -> dict[str, Any]:
    """Both documents: {"user_memory": UserMemoryContent, "work_memory": WorkProfileContent, "status": ...}
    (a subject with no memory has both, with the seed's default content)."""
    return profiles.get_profiles(db, caller.namespace, subject)


@router.get("/{subject}/{doc_type}", response_model=ProfileDocument, responses=READ)
def get_profile(subject: str, doc_type: DocType, db: DbDep, caller: CallerDep) -> ProfileDocument:
    """One document: {"content": {...}, "status": active|disabled, "version": n, ...}."""
    return profiles.get_profile(db, caller.namespace, subject, doc_type)


@router.put("/{subject}/{doc_type}", response_model=ProfileDocument, responses=WRITE)
def put_profile(
    subject: str, doc_type: DocType, body: ProfileBody, db: WriterDep, caller: CallerDep
) -> ProfileDocument:
    """Replace the document's content (validated against the seed's model: 422 names the bad field's path);
    manual fields are protected from extraction."""
    return profiles.put_profile(db, caller.namespace, subject, doc_type, body.content)


@router.patch("/{subject}/{doc_type}", response_model=ProfileDocument, responses=WRITE)
def patch_profile(
    subject: str, doc_type: DocType, body: ProfileBody, db: WriterDep, caller: CallerDep
) -> ProfileDocument:
    """Set the given top-level fields (objects merge, lists replace); the others stay."""
    return profiles.patch_profile(db, caller.namespace, subject, doc_type, body.content)


@router.put("/{subject}/{doc_type}/status", response_model=ProfileDocument, responses=WRITE)
def put_profile_status(
    subject: str, doc_type: DocType, body: ProfileStatusBody, db: WriterDep, caller: CallerDep
) -> ProfileDocument:
    """active or disabled: a disabled document is left out of every context and tool answer."""
    return profiles.set_profile_status(db, caller.namespace, subject, doc_type, body.status)
