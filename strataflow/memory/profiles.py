"""Profiles over L2: seed 000 save_info / summarize and seed 002 user and work profile documents.

Documents are built from the subject's active L2 items (kind hot_summary excluded):
- the user document holds the basic, immigration and family profile keys and the subject's preferences,
  intents and observations;
- the work document holds the career keys and the project kinds (meta, status, decision, feedback, reference).
Each field is {value, source, confidence, last_updated_at, kind}. A document is ACTIVE or DISABLED (a disabled
document is still kept up to date, but agents should not read it). A manual edit (PUT or PATCH) is written to
L2 as a manual item first, so extraction never silently overwrites it (see strataflow.memory.store).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field
from sqlalchemy import Connection, text

from models.vocabulary import PROFILE_KEYS, PROFILE_SECTIONS, section_of
from strataflow.memory import store

DocType = Literal["user", "work"]
DOC_TYPES: tuple[str, ...] = ("user", "work")
WORK_KINDS = frozenset({"meta", "status", "decision", "feedback", "reference"})
PROFILE_KIND_ORDER = ("fact", "intent", "preference", "observation", "meta", "status")

SELECT_ACTIVE_ITEMS = text(
    """
    select kind, key, value, statement, source, confidence, updated_at, valid_from
    from memory_items
    where namespace = :namespace and subject_id = :subject_id and status = 'active' and kind <> 'hot_summary'
    order by updated_at, item_id
    """
)
SELECT_KIND_OF_KEY = text(
    """
    select kind from memory_items
    where namespace = :namespace and subject_id = :subject_id and key = :key and kind <> 'hot_summary'
    order by status = 'active' desc, updated_at desc
    limit 1
    """
)
UPSERT_DOCUMENT = text(
    """
    insert into profile_documents (namespace, subject_id, doc_type, document)
    values (:namespace, :subject_id, :doc_type, cast(:document as jsonb))
    on conflict (namespace, subject_id, doc_type) do update
    set document = excluded.document, version = profile_documents.version + 1, updated_at = now()
    where profile_documents.document is distinct from excluded.document
    """
)
SELECT_DOCUMENT = text(
    """
    select document, status, version, updated_at from profile_documents
    where namespace = :namespace and subject_id = :subject_id and doc_type = :doc_type
    """
)
UPDATE_STATUS = text(
    """
    update profile_documents set status = :status, updated_at = now()
    where namespace = :namespace and subject_id = :subject_id and doc_type = :doc_type
    """
)


class SaveInfoResult(BaseModel):
    """Seed 000 save_info: what was offered, how many fields were written, which were skipped and why."""

    extracted_info: dict[str, Any]
    saved_count: int
    skipped_fields: list[str] = Field(default_factory=list)
    actions: dict[str, str] = Field(default_factory=dict)


class ProfileSummary(BaseModel):
    """Seed 000 summarize: the structured profile, completeness (0-100, share of vocabulary keys filled)."""

    basic: dict[str, Any]
    career: dict[str, Any]
    immigration: dict[str, Any]
    family: dict[str, Any]
    completeness: int = Field(ge=0, le=100)
    narrative: str


class ProfileDocument(BaseModel):
    """Seed 002: one owner's user or work document."""

    namespace: str
    subject_id: str
    doc_type: str
    status: str
    version: int
    document: dict[str, Any]


def save_info(
    conn: Connection,
    namespace: str,
    subject_id: str,
    extracted: dict[str, Any],
    event_at: datetime | None = None,
    source: str = "extracted",
    run_id: Any = None,
) -> SaveInfoResult:
    """Save profile fields (key -> value); values equal to what is stored are skipped, newer ones override."""
    when = event_at or datetime.now(UTC)
    saved, skipped, actions = 0, [], {}
    for key, value in extracted.items():
        if value is None or value == "":
            skipped.append(key)
            actions[key] = "empty"
            continue
        action = store.upsert_item(
            conn,
            namespace=namespace,
            subject_id=subject_id,
            kind=_kind_of(conn, namespace, subject_id, key),
            key=key,
            value=value,
            statement=f"{key}: {_text(value)}",
            source=source,
            event_at=when,
            run_id=run_id,
            confidence=1.0,
        )
        actions[key] = action
        if action in store.CHANGED_ACTIONS:
            saved += 1
        else:
            skipped.append(key)
    if saved:
        refresh_documents(conn, namespace, subject_id)
    return SaveInfoResult(
        extracted_info=dict(extracted), saved_count=saved, skipped_fields=skipped, actions=actions
    )


def summarize(conn: Connection, namespace: str, subject_id: str) -> ProfileSummary:
    """The structured profile (basic, career, immigration, family), its completeness and a narrative."""
    values = _profile_values(conn, namespace, subject_id)
    sections = {name: {k: values[k] for k in keys if k in values} for name, keys in PROFILE_SECTIONS.items()}
    filled = sum(len(section) for section in sections.values())
    completeness = round(100 * filled / len(PROFILE_KEYS))
    return ProfileSummary(**sections, completeness=completeness, narrative=_narrative(sections, completeness))


def build_profile_documents(conn: Connection, namespace: str, subject_id: str) -> dict[str, dict[str, Any]]:
    """The user and work documents of a subject from its active L2 items: {doc_type: {key: field}}."""
    documents: dict[str, dict[str, Any]] = {"user": {}, "work": {}}
    params = {"namespace": namespace, "subject_id": subject_id}
    for row in conn.execute(SELECT_ACTIVE_ITEMS, params):  # oldest first: the newest item of a key wins
        doc_type = "work" if section_of(row.key) == "career" or row.kind in WORK_KINDS else "user"
        documents[doc_type][row.key] = {
            "value": row.value,
            "source": row.source,
            "confidence": round(float(row.confidence), 3),
            "last_updated_at": row.updated_at.isoformat(),
            "kind": row.kind,
        }
    return documents


def refresh_documents(conn: Connection, namespace: str, subject_id: str) -> None:
    """Rewrite both documents from L2 (version + 1 only when a document changed; status is kept)."""
    for doc_type, document in build_profile_documents(conn, namespace, subject_id).items():
        conn.execute(
            UPSERT_DOCUMENT,
            {
                "namespace": namespace,
                "subject_id": subject_id,
                "doc_type": doc_type,
                "document": json.dumps(document, ensure_ascii=False),
            },
        )


def get_profile(conn: Connection, namespace: str, subject_id: str, doc_type: str) -> ProfileDocument | None:
    """GET: the stored document, or None when the subject has none."""
    _check_doc_type(doc_type)
    params = {"namespace": namespace, "subject_id": subject_id, "doc_type": doc_type}
    row = conn.execute(SELECT_DOCUMENT, params).first()
    if row is None:
        return None
    return ProfileDocument(
        namespace=namespace,
        subject_id=subject_id,
        doc_type=doc_type,
        status=row.status,
        version=row.version,
        document=row.document,
    )


def patch_profile(
    conn: Connection, namespace: str, subject_id: str, doc_type: str, fields: dict[str, Any]
) -> ProfileDocument:
    """PATCH: set the given fields (value None deletes the field) as manual items; others stay."""
    _check_doc_type(doc_type)
    now = datetime.now(UTC)
    for key, value in fields.items():
        kind = _kind_of(conn, namespace, subject_id, key, doc_type)
        if value is None:
            store.delete_item(
                conn,
                namespace=namespace,
                subject_id=subject_id,
                kind=kind,
                key=key,
                event_at=now,
                source="manual",
            )
        else:
            store.upsert_item(
                conn,
                namespace=namespace,
                subject_id=subject_id,
                kind=kind,
                key=key,
                value=value,
                statement=f"{key}: {_text(value)}",
                source="manual",
                confidence=1.0,
                event_at=now,
            )
    refresh_documents(conn, namespace, subject_id)
    document = get_profile(conn, namespace, subject_id, doc_type)
    assert document is not None
    return document


def put_profile(
    conn: Connection, namespace: str, subject_id: str, doc_type: str, fields: dict[str, Any]
) -> ProfileDocument:
    """PUT: the document becomes exactly these fields (fields not given are deleted), all source manual."""
    current = get_profile(conn, namespace, subject_id, doc_type)
    if current is None:
        refresh_documents(conn, namespace, subject_id)
        current = get_profile(conn, namespace, subject_id, doc_type)
    removed = {key: None for key in (current.document if current else {}) if key not in fields}
    return patch_profile(conn, namespace, subject_id, doc_type, {**removed, **fields})


def set_profile_status(conn: Connection, namespace: str, subject_id: str, doc_type: str, status: str) -> bool:
    """ACTIVE or DISABLED; False when the subject has no such document."""
    _check_doc_type(doc_type)
    if status not in ("ACTIVE", "DISABLED"):
        raise ValueError(f"profile status must be ACTIVE or DISABLED, not {status!r}")
    params = {"namespace": namespace, "subject_id": subject_id, "doc_type": doc_type, "status": status}
    return conn.execute(UPDATE_STATUS, params).rowcount > 0


def render_profile_block(document: ProfileDocument) -> str:
    """Seed 002 prompt markers: the document's values between <user-profile> / <work-profile> markers."""
    lines = [f"{key}: {_text(field['value'])}" for key, field in sorted(document.document.items())]
    tag = f"{document.doc_type}-profile"
    return f"<{tag}>\n" + "\n".join(lines) + f"\n</{tag}>"


def _profile_values(conn: Connection, namespace: str, subject_id: str) -> dict[str, Any]:
    """Profile key -> value, preferring facts over other kinds when a key appears under several kinds."""
    best: dict[str, tuple[int, Any]] = {}
    for row in conn.execute(SELECT_ACTIVE_ITEMS, {"namespace": namespace, "subject_id": subject_id}):
        if row.key not in PROFILE_KEYS:
            continue
        rank = (
            PROFILE_KIND_ORDER.index(row.kind) if row.kind in PROFILE_KIND_ORDER else len(PROFILE_KIND_ORDER)
        )
        if row.key not in best or rank <= best[row.key][0]:
            best[row.key] = (rank, row.value)
    return {key: value for key, (_, value) in best.items()}


def _narrative(sections: dict[str, dict[str, Any]], completeness: int) -> str:
    parts = []
    for name, fields in sections.items():
        if fields:
            parts.append(
                f"{name.capitalize()}: "
                + "; ".join(f"{k.replace('_', ' ')} {_text(v)}" for k, v in fields.items())
                + "."
            )
    if not parts:
        return "Nothing is known about this person yet (profile 0% complete)."
    missing = [name for name, fields in sections.items() if not fields]
    tail = f" Missing: {', '.join(missing)}." if missing else ""
    return " ".join(parts) + f" Profile {completeness}% complete." + tail


def _kind_of(conn: Connection, namespace: str, subject_id: str, key: str, doc_type: str = "user") -> str:
    params = {"namespace": namespace, "subject_id": subject_id, "key": key}
    kind = conn.execute(SELECT_KIND_OF_KEY, params).scalar()
    if kind is not None:
        return str(kind)
    if key in PROFILE_KEYS:
        return "fact"
    return "meta" if doc_type == "work" else "preference"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _check_doc_type(doc_type: str) -> None:
    if doc_type not in DOC_TYPES:
        raise ValueError(f"profile document type must be 'user' or 'work', not {doc_type!r}")
