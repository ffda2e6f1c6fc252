"""/v1/profiles (seed 002): a subject's user and work documents, their content and their status."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter

from strataflow.service import calls
from strataflow.service.deps import CallerDep, DbDep, WriterDep
from strataflow.service.errors import error_responses
from strataflow.service.schemas import ProfileBody, ProfileStatusBody

router = APIRouter(prefix="/v1/profiles", tags=["profiles"])
DocType = Literal["user", "work"]
READ = error_responses(401, 403, 404, 422, 429, 503)
WRITE = error_responses(401, 403, 404, 422, 429, 503)


@router.get("/{subject}", response_model=dict[str, Any], responses=READ)
def get_profiles(subject: str, db: DbDep, caller: CallerDep) -> dict[str, Any]:
    """Both documents: {"user_memory": UserMemoryContent, "work_memory": WorkProfileContent}."""
    return calls.profile_documents(db, caller.namespace, subject)


@router.get("/{subject}/{doc_type}", response_model=dict[str, Any], responses=READ)
def get_profile(subject: str, doc_type: DocType, db: DbDep, caller: CallerDep) -> dict[str, Any]:
    """One document: {"content": {...}, "status": ACTIVE|DISABLED, "version": n}."""
    return calls.profile_document(db, caller.namespace, subject, doc_type)


@router.put("/{subject}/{doc_type}", response_model=dict[str, Any], responses=WRITE)
def put_profile(
    subject: str, doc_type: DocType, body: ProfileBody, db: WriterDep, caller: CallerDep
) -> dict[str, Any]:
    """Replace the document's content (manual fields are protected from extraction)."""
    return calls.profile_put(db, caller.namespace, subject, doc_type, body.content)


@router.patch("/{subject}/{doc_type}", response_model=dict[str, Any], responses=WRITE)
def patch_profile(
    subject: str, doc_type: DocType, body: ProfileBody, db: WriterDep, caller: CallerDep
) -> dict[str, Any]:
    """Set the given fields of the document (null removes one); the others stay."""
    return calls.profile_patch(db, caller.namespace, subject, doc_type, body.content)


@router.put("/{subject}/{doc_type}/status", response_model=dict[str, Any], responses=WRITE)
def put_profile_status(
    subject: str, doc_type: DocType, body: ProfileStatusBody, db: WriterDep, caller: CallerDep
) -> dict[str, Any]:
    """ACTIVE or DISABLED: a disabled document is left out of every context and tool answer."""
    return calls.profile_status(db, caller.namespace, subject, doc_type, body.status)
