"""Seed 002 profile documents: each subject's user and work document, typed, with status and manual edits.

A document = what L2 says (strataflow.memory.profile_mapping, computed when read) + the owner's manual edits
(the `manual` overlay of profile_documents), so:
- both documents exist for every subject: a subject with no row reads as the default (empty) content built
  from its L2 items; extraction writes both rows (strataflow/pipeline/extract.py calls refresh_documents per
  scope);
- a PUT or PATCH is validated against UserMemoryContent / WorkProfileContent (ProfileValidationError names
  the path of the bad field, e.g. people.0.name) and only what the client changed becomes manual: a changed
  top-level field (or a sub-field of preferences, scheduling_preferences, work_habits), a changed or new
  entry of a list (matched by name; its meta becomes {source: manual, confidence: 1.0, now}). An entry the
  client removed stays hidden until L2 learns something newer about it;
- extraction never overwrites a manual field or entry (the overlay wins when the document is read);
- status is ACTIVE or DISABLED (stored upper-case as in the schema, answered as the seed's lower-case
  values). A DISABLED document is still refreshed by extraction, but build_context and tool answers leave it
  out (get_profiles(..., include_disabled=False) answers None for it, as seed 002's `| null`).
A restore (`strataflow import`, restore_document) writes an exported row as it was (content, manual
overlay, status, version, times): a row the subject lacks is added, a row older than the export is replaced,
anything else stays.
The caller owns the transaction.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection, text

from models.profiles import CONTENT_MODELS, ENTRY_FIELDS, OBJECT_FIELDS, MemoryStatus, ProfileDocument
from strataflow.llm.prompt_blocks import escape_json
from strataflow.memory.profile_mapping import derive_contents, load_items, name_key

DOC_TYPES: tuple[str, ...] = ("user", "work")
MARKERS = {"user": "USER_MEMORY", "work": "WORK_MEMORY"}

SELECT_ROWS = text(
    """
    select doc_type, document, manual, status, version, updated_at from profile_documents
    where namespace = :namespace and subject_id = :subject_id
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
UPSERT_EDIT = text(
    """
    insert into profile_documents (namespace, subject_id, doc_type, document, manual)
    values (:namespace, :subject_id, :doc_type, cast(:document as jsonb), cast(:manual as jsonb))
    on conflict (namespace, subject_id, doc_type) do update
    set document = excluded.document, manual = excluded.manual, version = profile_documents.version + 1,
        updated_at = now()
    where (profile_documents.document, profile_documents.manual)
        is distinct from (excluded.document, excluded.manual)
    """
)
UPSERT_STATUS = text(
    """
    insert into profile_documents (namespace, subject_id, doc_type, document, status)
    values (:namespace, :subject_id, :doc_type, cast(:document as jsonb), :status)
    on conflict (namespace, subject_id, doc_type) do update
    set status = excluded.status, updated_at = now()
    where profile_documents.status is distinct from excluded.status
    """
)
RESTORE_DOCUMENT = text(
    """
    insert into profile_documents (namespace, subject_id, doc_type, document, manual, status, version,
                                   created_at, updated_at)
    values (:namespace, :subject_id, :doc_type, cast(:document as jsonb), cast(:manual as jsonb), :status,
            :version, :created_at, :updated_at)
    on conflict (namespace, subject_id, doc_type) do update
    set document = excluded.document, manual = excluded.manual, status = excluded.status,
        version = excluded.version, created_at = excluded.created_at, updated_at = excluded.updated_at
    where profile_documents.updated_at < excluded.updated_at
    returning xmax = 0 as inserted
    """
)


class ProfileValidationError(ValueError):
    """A PUT/PATCH content that does not fit the seed's model; `path` names the field (people.0.name)."""

    def __init__(self, doc_type: str, path: str, message: str) -> None:
        self.doc_type, self.path, self.message = doc_type, path, message
        super().__init__(f"{doc_type} profile: {path or 'content'}: {message}")


def get_profiles(
    conn: Connection, namespace: str, subject_id: str, *, include_disabled: bool = True
) -> dict[str, Any]:
    """Seed 002 GET /: {"user_memory": content, "work_memory": content, "status": {"user": .., "work": ..}}.

    With include_disabled=False (tool answers), a DISABLED document answers None.
    """
    documents = _documents(conn, namespace, subject_id)
    shown = {
        doc_type: doc.content if include_disabled or doc.status == MemoryStatus.ACTIVE else None
        for doc_type, doc in documents.items()
    }
    return {
        "user_memory": shown["user"],
        "work_memory": shown["work"],
        "status": {doc_type: doc.status for doc_type, doc in documents.items()},
    }


def get_profile(conn: Connection, namespace: str, subject_id: str, doc_type: str) -> ProfileDocument:
    """Seed 002 GET /user or /work: the document (default content when the subject has no row yet)."""
    _check_doc_type(doc_type)
    return _documents(conn, namespace, subject_id)[doc_type]


def put_profile(
    conn: Connection, namespace: str, subject_id: str, doc_type: str, content: dict[str, Any]
) -> ProfileDocument:
    """Seed 002 PUT: the document becomes `content` (fields left out take the model's defaults)."""
    _check_doc_type(doc_type)
    target = _validated(doc_type, content)
    return _write(conn, namespace, subject_id, doc_type, target, fields=tuple(target))


def patch_profile(
    conn: Connection, namespace: str, subject_id: str, doc_type: str, content: dict[str, Any]
) -> ProfileDocument:
    """Seed 002 PATCH: the given top-level fields change (objects merge, lists replace); others stay."""
    _check_doc_type(doc_type)
    if not isinstance(content, dict):
        raise ProfileValidationError(doc_type, "", "content must be a JSON object")
    current = get_profile(conn, namespace, subject_id, doc_type).content
    patched = copy.deepcopy(current)
    for field, value in content.items():
        if (
            field in OBJECT_FIELDS[doc_type]
            and isinstance(value, dict)
            and isinstance(patched.get(field), dict)
        ):
            patched[field] = {**patched[field], **value}
        else:
            patched[field] = value
    target = _validated(doc_type, patched)
    return _write(conn, namespace, subject_id, doc_type, target, fields=tuple(content))


def set_profile_status(
    conn: Connection, namespace: str, subject_id: str, doc_type: str, status: str
) -> ProfileDocument:
    """Mark a document active or disabled (either case); creates the row when the subject has none."""
    _check_doc_type(doc_type)
    try:
        wanted = MemoryStatus(str(status).strip().lower())
    except ValueError:
        raise ProfileValidationError(
            doc_type, "status", f"must be active or disabled, not {status!r}"
        ) from None
    current = get_profile(conn, namespace, subject_id, doc_type)
    conn.execute(
        UPSERT_STATUS,
        {**_key(namespace, subject_id, doc_type), "document": _json(current.content), "status": wanted.name},
    )
    return get_profile(conn, namespace, subject_id, doc_type)


def refresh_documents(conn: Connection, namespace: str, subject_id: str) -> None:
    """Write both documents as they read now (L2 + manual edits); a row only changes when its content did."""
    for doc_type, document in _documents(conn, namespace, subject_id).items():
        conn.execute(
            UPSERT_DOCUMENT, {**_key(namespace, subject_id, doc_type), "document": _json(document.content)}
        )


def restore_document(
    conn: Connection,
    namespace: str,
    subject_id: str,
    doc_type: str,
    stored: dict[str, Any],
) -> str:
    """Write an exported row (document, manual, status ACTIVE or DISABLED, version, created_at, updated_at)
    as it was; returns new, updated (the namespace's row was older) or unchanged."""
    _check_doc_type(doc_type)
    params = {
        **_key(namespace, subject_id, doc_type),
        **{name: stored[name] for name in ("status", "version", "created_at", "updated_at")},
        "document": _json(stored["document"]),
        "manual": _json(stored["manual"]),
    }
    written = conn.execute(RESTORE_DOCUMENT, params).first()
    if written is None:
        return "unchanged"
    return "new" if written.inserted else "updated"


def profile_body(document: ProfileDocument) -> str:
    """The filled fields as compact JSON (empty fields and entry meta left out); '<' is written as \\u003c so
    user text cannot close a tag of the prompt around it. Empty string when nothing is filled."""
    filled = _pruned(document.content)
    if not filled:
        return ""
    return escape_json(json.dumps(filled, ensure_ascii=False, separators=(",", ":")))


def profile_markers(doc_type: str) -> tuple[str, str]:
    """Seed 002's prompt markers: <!-- USER_MEMORY_START --> / <!-- USER_MEMORY_END --> (WORK_ for work)."""
    return f"<!-- {MARKERS[doc_type]}_START -->", f"<!-- {MARKERS[doc_type]}_END -->"


def _documents(conn: Connection, namespace: str, subject_id: str) -> dict[str, ProfileDocument]:
    rows = {row.doc_type: row for row in conn.execute(SELECT_ROWS, _key(namespace, subject_id, None))}
    derived = derive_contents(load_items(conn, namespace, subject_id))
    documents = {}
    for doc_type in DOC_TYPES:
        row = rows.get(doc_type)
        manual = _overlay(row.manual if row is not None else None)
        documents[doc_type] = ProfileDocument(
            namespace=namespace,
            subject_id=subject_id,
            doc_type=doc_type,
            status=MemoryStatus[row.status].value if row is not None else MemoryStatus.ACTIVE.value,
            version=row.version if row is not None else 0,
            updated_at=row.updated_at if row is not None else None,
            content=_merge(doc_type, derived[doc_type], manual),
        )
    return documents


def _merge(doc_type: str, derived: dict[str, Any], manual: dict[str, Any]) -> dict[str, Any]:
    """The document: derived content, manual fields over it, manual entries before the derived ones."""
    content = copy.deepcopy(derived)
    for path, value in manual["fields"].items():
        field, _, sub = path.partition(".")
        if sub:
            content[field][sub] = value
        else:
            content[field] = value
    for field in ENTRY_FIELDS[doc_type]:
        edited = manual["entries"].get(field, {})
        removed = manual["removed"].get(field, {})
        kept = []
        for entry in content[field]:
            ident = name_key(entry["name"])
            when = (entry.get("meta") or {}).get("last_updated_at")
            if ident in edited or (ident in removed and not _newer(when, removed[ident])):
                continue
            kept.append(entry)
        content[field] = list(edited.values()) + kept
    return content


def _write(
    conn: Connection,
    namespace: str,
    subject_id: str,
    doc_type: str,
    target: dict[str, Any],
    fields: tuple[str, ...],
) -> ProfileDocument:
    """Record what the client changed in the manual overlay and store the document."""
    rows = {row.doc_type: row for row in conn.execute(SELECT_ROWS, _key(namespace, subject_id, None))}
    row = rows.get(doc_type)
    manual = _overlay(row.manual if row is not None else None)
    current = get_profile(conn, namespace, subject_id, doc_type).content
    now = datetime.now(UTC).isoformat()
    for field in fields:
        if field in ENTRY_FIELDS[doc_type]:
            _edit_entries(doc_type, field, current[field], target[field], manual, now)
        elif field in OBJECT_FIELDS[doc_type]:
            for sub, value in target[field].items():
                if value != current[field].get(sub):
                    manual["fields"][f"{field}.{sub}"] = value
        elif target[field] != current[field]:
            manual["fields"][field] = target[field]
    document = _merge(doc_type, derive_contents(load_items(conn, namespace, subject_id))[doc_type], manual)
    params = {**_key(namespace, subject_id, doc_type), "document": _json(document), "manual": _json(manual)}
    conn.execute(UPSERT_EDIT, params)
    return get_profile(conn, namespace, subject_id, doc_type)


def _edit_entries(
    doc_type: str,
    field: str,
    current: list[dict[str, Any]],
    target: list[dict[str, Any]],
    manual: dict[str, Any],
    now: str,
) -> None:
    edited = manual["entries"].setdefault(field, {})
    removed = manual["removed"].setdefault(field, {})
    before = {name_key(entry["name"]): entry for entry in current}
    seen: set[str] = set()
    for index, entry in enumerate(target):
        ident = name_key(entry["name"])
        if ident in seen:
            raise ProfileValidationError(
                doc_type, f"{field}.{index}.name", f"duplicate name {entry['name']!r}"
            )
        seen.add(ident)
        old = before.get(ident)
        if old is not None and _without_meta(old) == _without_meta(entry):
            continue  # unchanged: stays extracted (or manual) as it was
        edited[ident] = {**entry, "meta": {"source": "manual", "confidence": 1.0, "last_updated_at": now}}
        removed.pop(ident, None)
    for ident in before.keys() - seen:
        edited.pop(ident, None)
        removed[ident] = now


def _validated(doc_type: str, content: Any) -> dict[str, Any]:
    if not isinstance(content, dict):
        raise ProfileValidationError(doc_type, "", "content must be a JSON object")
    try:
        return CONTENT_MODELS[doc_type].model_validate(content).model_dump(mode="json")
    except ValidationError as exc:
        error = exc.errors()[0]
        path = ".".join(str(part) for part in error["loc"])
        raise ProfileValidationError(doc_type, path, error["msg"]) from None


def _overlay(raw: Any) -> dict[str, Any]:
    manual = dict(raw or {})
    return {
        "fields": dict(manual.get("fields") or {}),
        "entries": {k: dict(v) for k, v in (manual.get("entries") or {}).items()},
        "removed": {k: dict(v) for k, v in (manual.get("removed") or {}).items()},
    }


def _newer(when: str | None, than: str) -> bool:
    """True when an entry's last update (ISO time) is after a removal (ISO time)."""
    return when is not None and datetime.fromisoformat(when) > datetime.fromisoformat(than)


def _without_meta(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k != "meta"}


def _pruned(value: Any) -> Any:
    """The value without meta, nulls, empty lists/objects and the seeds' default meeting durations."""
    if isinstance(value, dict):
        pruned = {k: _pruned(v) for k, v in value.items() if k != "meta"}
        return {
            k: v for k, v in pruned.items() if v not in (None, "", [], {}) and not _default_duration(k, v)
        }
    if isinstance(value, list):
        return [p for p in (_pruned(v) for v in value) if p not in (None, "", [], {})]
    return value


def _default_duration(key: str, value: Any) -> bool:
    return key == "preferred_meeting_duration_minutes" and value == [30, 60]


def _key(namespace: str, subject_id: str, doc_type: str | None) -> dict[str, Any]:
    return {"namespace": namespace, "subject_id": subject_id, "doc_type": doc_type}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _check_doc_type(doc_type: str) -> None:
    if doc_type not in DOC_TYPES:
        raise ProfileValidationError(str(doc_type), "doc_type", "must be 'user' or 'work'")
