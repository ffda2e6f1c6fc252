"""`strataflow import --from-mem0 PATH`: mem0 memories as strataflow entries, with their provenance.

PATH is one JSON file, either
- a mem0 OSS configuration (what `Memory.from_config` takes: it has `vector_store`, `embedder`, `llm` or
  `history_db_path`): the memories are read from its vector store (every point, through mem0's own store
  class; nothing is embedded and no LLM is asked, so a store filled with `infer=False` needs no key), or
- a mem0 platform export: the memories as `get_all` answers them, a list or an object holding them under
  `results` (or `memories`).

Each memory becomes an entry of the one L2 API (strataflow.memory.api.create_memory): subject = user_id,
agent = agent_id (the entry is that agent's own), type `user`, named and mapped as /mem0 names and maps a
memory (strataflow.adapters.mem0: the name is the text, run_id and app_id kept as /mem0 keeps them, so
re-adding an imported memory over /mem0 finds it instead of duplicating it), the text as content, event
time = mem0's updated_at (or created_at), metadata = mem0's metadata plus `imported_from` {system: mem0,
kind, file, id, hash, run_id, app_id, actor_id, role, categories, expiration_date, created_at, updated_at}
(the ones mem0 has). One transaction per subject. Importing again changes nothing; a memory whose text
changed in mem0 since becomes a new version of the entry imported from it (found by `imported_from.id`).
A memory that cannot be an entry (no user_id, empty text, a created_at or updated_at in the future) goes
to quarantine (source mem0:<file name>, position = its index in the file or store, from 1).
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection

from models.mem0_import import Mem0ImportResult, Mem0Memory
from models.messages import describe_errors
from strataflow.adapters.mem0 import item_with_metadata
from strataflow.adapters.mem0_names import mem0_entry_name, mem0_metadata
from strataflow.config import Settings
from strataflow.db.engine import engine_for
from strataflow.errors import UserError
from strataflow.memory.api import MemoryConflict, create_memory, get_memory, update_memory
from strataflow.memory.item_fields import MemoryFieldError
from strataflow.ops.transfer.layers import problem_row, quarantine
from strataflow.pipeline.progress import progress_bar

CONFIG_KEYS = frozenset({"vector_store", "embedder", "llm", "history_db_path", "graph_store", "version"})
# mem0's payload keys that are not the memory's own metadata (mem0/memory/main.py, get_all).
PAYLOAD_KEYS = frozenset(
    {"data", "hash", "created_at", "updated_at", "id", "text_lemmatized", "attributed_to", "user_id",
     "agent_id", "run_id", "actor_id", "role", "expiration_date"}
)  # fmt: skip
MAX_MEMORIES = 10_000_000
SHOWN_PROBLEMS = 20


class Mem0Error(UserError):
    """The file is neither a mem0 configuration nor a mem0 export, or its store cannot be read."""


def import_mem0(
    settings: Settings, path: Path, namespace: str, run_id: uuid.UUID | None = None, progress: bool = True
) -> Mem0ImportResult:
    """Import the memories of a mem0 store or export (module docstring) into namespace as entries."""
    kind, records = read_mem0(path)
    label = f"mem0:{path.name}"
    result = Mem0ImportResult(kind=kind, label=label, read=len(records))
    latest = datetime.now(UTC) + timedelta(days=settings.api_write_future_days)
    by_subject: dict[str, list[tuple[int, dict[str, Any], Mem0Memory]]] = defaultdict(list)
    problems: list[dict[str, Any]] = []
    for position, record in enumerate(records, start=1):
        try:
            memory = Mem0Memory.model_validate(record)
        except ValidationError as exc:
            problem = describe_errors(exc)
            problems.append(
                _problem(label, namespace, position, record, problem.field, problem.reason, problem.error)
            )
            continue
        by_subject[memory.user_id].append((position, record, memory))
    with (
        engine_for(settings).connect() as conn,
        progress_bar("importing mem0", len(records), progress) as advance,
    ):
        advance(len(problems))
        for memories in by_subject.values():
            with conn.begin():
                for position, record, memory in memories:
                    refused = _future(memory, latest) or _write(
                        conn, namespace, memory, kind, path.name, result
                    )
                    if refused is not None:
                        problems.append(_problem(label, namespace, position, record, *refused))
                    advance(1)
            result.subjects += 1
        with conn.begin():
            quarantine(conn, settings, run_id, problems)
    result.quarantined = len(problems)
    result.problems = [problem["error"] for problem in problems[:SHOWN_PROBLEMS]]
    return result


def read_mem0(path: Path) -> tuple[str, list[dict[str, Any]]]:
    """("oss store" or "platform export", the memories as mem0 answers them) of a mem0 JSON file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise Mem0Error(f"{path}: line {exc.lineno} column {exc.colno}: not JSON ({exc.msg})") from None
    except UnicodeDecodeError as exc:
        raise Mem0Error(f"{path}: not UTF-8 text ({exc.reason})") from None
    if isinstance(data, dict) and CONFIG_KEYS & data.keys():
        return "oss store", _store_memories(path, data)
    if isinstance(data, dict):
        data = data.get("results", data.get("memories"))
    if not isinstance(data, list):
        raise Mem0Error(
            f"{path}: neither a mem0 configuration (vector_store, embedder, llm ...) nor a mem0 export "
            "(a list of memories, or an object with results or memories)"
        )
    return "platform export", [item if isinstance(item, dict) else {"memory": item} for item in data]


def _store_memories(path: Path, config: dict[str, Any]) -> list[dict[str, Any]]:
    """Every memory of the configured vector store, as mem0's get_all shapes them."""
    try:
        from mem0.configs.base import MemoryConfig
        from mem0.utils.factory import VectorStoreFactory
    except ImportError:
        raise Mem0Error("reading a mem0 store needs mem0ai: pip install 'strataflow[mem0]'") from None
    try:
        parsed = MemoryConfig(**config)
    except (ValidationError, ValueError) as exc:
        raise Mem0Error(f"{path}: not a mem0 configuration: {str(exc).splitlines()[0]}") from None
    store_config = parsed.vector_store.config
    local = (
        getattr(store_config, "path", None) if parsed.vector_store.provider in ("qdrant", "faiss") else None
    )
    if local and not getattr(store_config, "host", None) and not getattr(store_config, "url", None):
        if not Path(local).exists():
            raise Mem0Error(f"{path}: the mem0 store {local} does not exist")
    try:
        store = VectorStoreFactory.create(parsed.vector_store.provider, store_config)
        listed = store.list(filters=None, top_k=MAX_MEMORIES)
    except Exception as exc:  # any store's own error: name it, the import cannot go on
        raise Mem0Error(f"{path}: cannot read the mem0 store: {type(exc).__name__}: {exc}") from None
    points = (
        listed[0]
        if isinstance(listed, list | tuple) and listed and isinstance(listed[0], list | tuple)
        else listed
    )
    memories = []
    for point in points or []:
        payload = dict(getattr(point, "payload", None) or {})
        memory = {key: payload[key] for key in PAYLOAD_KEYS & payload.keys() if key != "data"}
        memory.update(id=str(getattr(point, "id", "")), memory=payload.get("data"))
        extra = {key: value for key, value in payload.items() if key not in PAYLOAD_KEYS}
        memory["metadata"] = extra or None
        memories.append(memory)
    return memories


def _future(memory: Mem0Memory, latest: datetime) -> tuple[str | None, str, str] | None:
    """(field, reason, error) when a memory dates itself in the future: an import trusts no such time."""
    for name in ("created_at", "updated_at"):
        moment = getattr(memory, name)
        if moment is not None and moment > latest:
            when = latest.isoformat(timespec="seconds")
            return name, "in_future", f"field {name!r}: lies in the future (after {when}); not imported"
    return None


def _write(
    conn: Connection, namespace: str, memory: Mem0Memory, kind: str, file_name: str, result: Mem0ImportResult
) -> tuple[str | None, str, str] | None:
    """Create or update the memory's entry; (field, reason, error) when it cannot be one."""
    provenance = {
        "system": "mem0", "kind": kind, "file": file_name, "id": memory.id, "hash": memory.hash,
        "run_id": memory.run_id, "app_id": memory.app_id, "actor_id": memory.actor_id, "role": memory.role,
        "categories": memory.categories, "expiration_date": memory.expiration_date,
        "created_at": memory.created_at, "updated_at": memory.updated_at,
    }  # fmt: skip
    metadata = {
        **mem0_metadata(memory.metadata, memory.run_id, memory.app_id),
        "imported_from": {
            k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in provenance.items() if v
        },
    }
    name = mem0_entry_name(memory.memory)
    try:
        earlier = item_with_metadata(
            conn, namespace, memory.user_id, ["imported_from", "id"], memory.id, agent_id=memory.agent_id
        )
        if earlier is not None and get_memory(conn, namespace, earlier, agent_id=memory.agent_id).content != (
            memory.memory
        ):
            with conn.begin_nested():
                update_memory(
                    conn, namespace, earlier, name=name, value=memory.memory, agent_id=memory.agent_id,
                    metadata=metadata,
                )  # fmt: skip
            result.updated += 1
            return None
        with conn.begin_nested():
            create_memory(
                conn, namespace, memory.user_id, "user", name, memory.memory, agent_id=memory.agent_id,
                metadata=metadata, event_at=memory.updated_at or memory.created_at,
            )  # fmt: skip
        result.new += 1
    except MemoryConflict as taken:
        entry = get_memory(conn, namespace, taken.item_id, agent_id=memory.agent_id)
        if entry.content == memory.memory:
            result.unchanged += 1
        else:
            update_memory(
                conn, namespace, taken.item_id, value=memory.memory, agent_id=memory.agent_id,
                metadata=metadata,
            )  # fmt: skip
            result.updated += 1
    except MemoryFieldError as exc:
        return exc.field, "bad_value", str(exc)
    return None


def _problem(
    label: str,
    namespace: str,
    position: int,
    record: Any,
    field: str | None,
    reason: str,
    error: str,
) -> dict[str, Any]:
    known = record if isinstance(record, dict) else {}
    named = f" (id {known['id']})" if known.get("id") else ""
    where = f"{label} memory {position}{named}: {error}"
    raw = json.dumps(record, default=str)
    return problem_row(label, namespace, position, known.get("user_id"), field, reason, where, raw)
