"""/v1/profiles (seed 002): a subject's user and work documents, their content and their status
(strataflow.memory.profiles).

The user and the work document have paths of their own (`/v1/profiles/{subject}/user`, `/work`), so the
OpenAPI document types each body with its seed model (UserMemoryContent, WorkProfileContent): a body that
follows the document is a body the service takes. In the named lists (people, places, recurring_routines,
current_projects, team_members) a name identifies an entry (case and spacing aside): when a body repeats a
name, its later entry replaces the earlier one.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path
from pydantic import Field

from models.messages import SAFE_ID
from models.profiles import ENTRY_FIELDS, ProfileDocument, UserMemoryContent, WorkProfileContent
from strataflow.memory import profiles
from strataflow.memory.profile_mapping import name_key
from strataflow.service.deps import ActingDep, DbDep, WritingDep, work
from strataflow.service.errors import error_responses
from strataflow.service.schemas import ID_MAX, ProfileStatusBody, Strict

router = APIRouter(prefix="/v1/profiles", tags=["profiles"])
DocType = Literal["user", "work"]
SubjectPath = Annotated[
    str, Path(min_length=1, max_length=ID_MAX, pattern=SAFE_ID, description="the user (subject_id)")
]
RESPONSES = error_responses()
READ, WRITE = [work("read")], [work("write")]


def one_entry_per_name(doc_type: str, content: dict[str, Any]) -> dict[str, Any]:
    """The content with each named list keeping one entry per name: the last one given (module docstring)."""
    for field in ENTRY_FIELDS[doc_type]:
        entries = content.get(field)
        if isinstance(entries, list):
            last = {name_key(entry["name"]): index for index, entry in enumerate(entries)}
            content[field] = [
                entry for index, entry in enumerate(entries) if last[name_key(entry["name"])] == index
            ]
    return content


class UserProfileBody(Strict):
    content: UserMemoryContent = Field(description="seed 002 UserMemoryContent (PATCH: the fields to set)")


class WorkProfileBody(Strict):
    content: WorkProfileContent = Field(description="seed 002 WorkProfileContent (PATCH: the fields to set)")


@router.get("/{subject}", response_model=dict[str, Any], responses=RESPONSES, dependencies=READ)
def get_profiles(subject: SubjectPath, db: DbDep, acting: ActingDep) -> dict[str, Any]:
    """Both documents: {"user_memory": UserMemoryContent, "work_memory": WorkProfileContent, "status": ...}
    (a subject with no memory has both, with the seed's default content)."""
    return profiles.get_profiles(db, acting.namespace, subject)


@router.get("/{subject}/user", response_model=ProfileDocument, responses=RESPONSES, dependencies=READ)
def get_user_profile(subject: SubjectPath, db: DbDep, acting: ActingDep) -> ProfileDocument:
    """The user document: {"content": {...}, "status": active|disabled, "version": n, ...}."""
    return profiles.get_profile(db, acting.namespace, subject, "user")


@router.put("/{subject}/user", response_model=ProfileDocument, responses=RESPONSES, dependencies=WRITE)
def put_user_profile(
    subject: SubjectPath, body: UserProfileBody, db: DbDep, acting: WritingDep
) -> ProfileDocument:
    """Replace the user document's content (fields left out take the seed's defaults); manual fields are
    protected from extraction."""
    return profiles.put_profile(
        db,
        acting.namespace,
        subject,
        "user",
        one_entry_per_name("user", body.content.model_dump(mode="json")),
    )


@router.patch("/{subject}/user", response_model=ProfileDocument, responses=RESPONSES, dependencies=WRITE)
def patch_user_profile(
    subject: SubjectPath, body: UserProfileBody, db: DbDep, acting: WritingDep
) -> ProfileDocument:
    """Set the given top-level fields of the user document (objects merge, lists replace); the others stay."""
    content = one_entry_per_name("user", body.content.model_dump(mode="json", exclude_unset=True))
    return profiles.patch_profile(db, acting.namespace, subject, "user", content)


@router.get("/{subject}/work", response_model=ProfileDocument, responses=RESPONSES, dependencies=READ)
def get_work_profile(subject: SubjectPath, db: DbDep, acting: ActingDep) -> ProfileDocument:
    """The work document: {"content": {...}, "status": active|disabled, "version": n, ...}."""
    return profiles.get_profile(db, acting.namespace, subject, "work")


@router.put("/{subject}/work", response_model=ProfileDocument, responses=RESPONSES, dependencies=WRITE)
def put_work_profile(
    subject: SubjectPath, body: WorkProfileBody, db: DbDep, acting: WritingDep
) -> ProfileDocument:
    """Replace the work document's content (fields left out take the seed's defaults); manual fields are
    protected from extraction."""
    return profiles.put_profile(
        db,
        acting.namespace,
        subject,
        "work",
        one_entry_per_name("work", body.content.model_dump(mode="json")),
    )


@router.patch("/{subject}/work", response_model=ProfileDocument, responses=RESPONSES, dependencies=WRITE)
def patch_work_profile(
    subject: SubjectPath, body: WorkProfileBody, db: DbDep, acting: WritingDep
) -> ProfileDocument:
    """Set the given top-level fields of the work document (objects merge, lists replace); the others stay."""
    content = one_entry_per_name("work", body.content.model_dump(mode="json", exclude_unset=True))
    return profiles.patch_profile(db, acting.namespace, subject, "work", content)


@router.put(
    "/{subject}/{doc_type}/status", response_model=ProfileDocument, responses=RESPONSES, dependencies=WRITE
)
def put_profile_status(
    subject: SubjectPath, doc_type: DocType, body: ProfileStatusBody, db: DbDep, acting: WritingDep
) -> ProfileDocument:
    """active or disabled: a disabled document is left out of every context and tool answer."""
    return profiles.set_profile_status(db, acting.namespace, subject, doc_type, body.status)
