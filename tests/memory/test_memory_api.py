"""Memory CRUD (seed 003 provider) over L2 through memory.store: round trips with history, scopes, search."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Connection, Engine, text
from typer.testing import CliRunner

from strataflow.config import Settings
from strataflow.memory import store
from strataflow.memory.api import (
    MemoryNotFound,
    delete_memory,
    get_memory,
    list_memories,
    memory_history,
    normalize_kind,
    save_memory,
    update_memory,
)
from strataflow.retrieval.item_search import search_memories


def test_save_update_delete_round_trip_keeps_every_version(conn: Connection, namespace: str) -> None:
    saved = save_memory(conn, namespace, "u1", "fact", "age", 30, "I am 30", agent_id="agent-a")
    assert saved.action == "new"
    assert (saved.item.value, saved.item.source, saved.item.version, saved.item.agent_id) == (
        30,
        "manual",
        1,
        "agent-a",
    )

    updated = update_memory(conn, namespace, "u1", kind="fact", key="age", value=31)
    assert updated.action == "content_modified"
    assert (updated.item.value, updated.item.version, updated.item.statement) == (31, 2, "age: 31")
    assert updated.item.item_id == saved.item.item_id

    fetched = get_memory(conn, namespace, "u1", item_id=saved.item.item_id)
    assert fetched == updated.item

    deleted = delete_memory(conn, namespace, "u1", item_id=saved.item.item_id)
    assert (deleted.item.status, deleted.item.version) == ("deleted", 3)
    assert get_memory(conn, namespace, "u1", kind="fact", key="age") is None
    assert get_memory(conn, namespace, "u1", kind="fact", key="age", include_deleted=True) is not None

    history = memory_history(conn, namespace, saved.item.item_id)
    assert [(v.version, v.action, v.value, v.source) for v in history] == [
        (1, "new", 30, "manual"),
        (2, "content_modified", 31, "manual"),
        (3, "deleted", 31, "manual"),
    ]
    assert history[0].superseded_at is not None and history[0].valid_to is not None
    assert history[-1].superseded_at is None


def test_unchanged_save_writes_no_new_version(conn: Connection, namespace: str) -> None:
    first = save_memory(conn, namespace, "u1", "preference", "contact_channel", "wechat", "prefers WeChat")
    again = save_memory(conn, namespace, "u1", "preference", "contact_channel", "wechat", "prefers WeChat")
    assert (first.action, again.action) == ("new", "unchanged")
    assert len(memory_history(conn, namespace, first.item.item_id)) == 1


def test_seed_003_types_map_to_kinds_and_bad_input_names_the_field(conn: Connection, namespace: str) -> None:
    # user -> fact, project -> meta (DESIGN: seed 003 mapping); names become snake_case keys
    assert (normalize_kind("user"), normalize_kind("project"), normalize_kind("Reference")) == (
        "fact",
        "meta",
        "reference",
    )
    saved = save_memory(conn, namespace, "u1", "project", "Release Date", "2026-12-01")
    assert (saved.item.kind, saved.item.key) == ("meta", "release_date")
    with pytest.raises(ValueError, match="memory kind 'diary'"):
        save_memory(conn, namespace, "u1", "diary", "x", 1)
    with pytest.raises(ValueError, match="memory key '年龄'"):
        save_memory(conn, namespace, "u1", "fact", "年龄", 1)
    with pytest.raises(MemoryNotFound, match="fact:height"):
        update_memory(conn, namespace, "u1", kind="fact", key="height", value=180)


def test_list_and_get_respect_namespace_subject_and_agent_scope(conn: Connection, namespace: str) -> None:
    save_memory(conn, namespace, "u1", "fact", "age", 30, agent_id="agent-a")
    save_memory(conn, namespace, "u1", "fact", "location", "Hangzhou", agent_id="agent-b")
    save_memory(conn, namespace, "u2", "fact", "age", 41)
    save_memory(conn, namespace + "_other", "u1", "fact", "age", 99)

    assert {(i.subject_id, i.key) for i in list_memories(conn, namespace)} == {
        ("u1", "age"),
        ("u1", "location"),
        ("u2", "age"),
    }
    assert [i.key for i in list_memories(conn, namespace, "u1", agent_id="agent-b")] == ["location"]
    assert get_memory(conn, namespace, "u1", kind="fact", key="location", agent_id="agent-a") is None
    assert get_memory(conn, namespace, "u2", kind="fact", key="age").value == 41  # type: ignore[union-attr]


def test_chinese_queries_find_chinese_memories(conn: Connection, settings: Settings, namespace: str) -> None:
    save_memory(conn, namespace, "u1", "fact", "company", "阿里巴巴", "我在杭州的阿里巴巴做软件工程师")
    save_memory(conn, namespace, "u1", "fact", "university", "浙江大学", "我是浙江大学计算机专业毕业的")
    save_memory(
        conn, namespace, "u1", "preference", "meeting_style", "short", "I prefer short written summaries"
    )

    hits = search_memories(conn, settings, namespace, "你在哪个公司工作？阿里巴巴", "u1")
    assert hits and hits[0].item.key == "company"
    assert [h.item.key for h in search_memories(conn, settings, namespace, "浙江大学", "u1")][:1] == [
        "university"
    ]
    assert [h.item.key for h in search_memories(conn, settings, namespace, "summaries preferred", "u1")] == [
        "meeting_style"
    ]
    assert search_memories(conn, settings, namespace, "阿里巴巴", "someone-else") == []


def test_manual_edit_survives_a_later_extracted_value(conn: Connection, namespace: str) -> None:
    # extraction writes through the same store; a manual item is never silently overwritten
    saved = save_memory(conn, namespace, "u1", "fact", "age", 32, "I am 32 (corrected by the advisor)")
    later = datetime.now(UTC) + timedelta(minutes=1)
    action = store.upsert_item(
        conn,
        namespace=namespace,
        subject_id="u1",
        kind="fact",
        key="age",
        value=28,
        statement="我今年28岁",
        source="extracted",
        event_at=later,
        source_message_ids=[1],
        prompt_version="extract-v1",
        model="offline/rules",
    )
    assert action == "manual_protected"
    current = get_memory(conn, namespace, "u1", item_id=saved.item.item_id)
    assert current is not None and (current.value, current.source, current.version) == (32, "manual", 1)
    notes = conn.execute(
        text("select value, note from memory_item_versions where item_id = :id and note is not null"),
        {"id": saved.item.item_id},
    ).all()
    assert [row.value for row in notes] == [28]


def test_memory_cli_round_trip_commits_and_prints_json(namespace: str, settings: object) -> None:
    from strataflow.cli import app

    runner = CliRunner()
    scope = ["--namespace", namespace, "--subject", "u1"]
    saved = runner.invoke(app, ["memory", "save", *scope, "--kind", "fact", "--key", "age", "--value", "30"])
    assert saved.exit_code == 0, saved.output
    assert json.loads(saved.stdout)["item"]["value"] == 30
    updated = runner.invoke(
        app, ["memory", "update", *scope, "--kind", "fact", "--key", "age", "--value", "31"]
    )
    assert updated.exit_code == 0 and json.loads(updated.stdout)["action"] == "content_modified"
    got = runner.invoke(app, ["memory", "get", *scope, "--kind", "fact", "--key", "age", "--history"])
    assert [v["value"] for v in json.loads(got.stdout)["history"]] == [30, 31]
    listed = runner.invoke(app, ["memory", "list", *scope])
    assert [json.loads(line)["key"] for line in listed.stdout.splitlines()] == ["age"]
    found = runner.invoke(app, ["memory", "search", *scope, "--query", "age"])
    assert json.loads(found.stdout.splitlines()[0])["item"]["key"] == "age"
    deleted = runner.invoke(app, ["memory", "delete", *scope, "--kind", "fact", "--key", "age"])
    assert deleted.exit_code == 0 and json.loads(deleted.stdout)["item"]["status"] == "deleted"
    missing = runner.invoke(app, ["memory", "delete", *scope, "--kind", "fact", "--key", "age"])
    assert missing.exit_code == 1 and "no active memory item fact:age" in missing.stderr


def test_manual_profile_edit_survives_the_next_extraction(
    engine: Engine, settings: Settings, namespace: str, tmp_path: Path
) -> None:
    from strataflow.memory.profiles import get_profile, patch_profile
    from strataflow.pipeline.extract import extract_new
    from strataflow.pipeline.ingest import ingest_logs

    with engine.begin() as conn:
        patch_profile(conn, namespace, "u1", "work", {"occupation": "数据工程师"})  # seed 002 PATCH
        save_memory(conn, namespace, "u1", "fact", "age", 35, "35 (checked against the passport)")
    said_at = datetime.now(UTC).isoformat()
    records = [
        {"conversation_id": "c1", "subject_id": "u1", "source_message_id": "m1", "role": "user",
         "content": "我今年二十八岁，目前在杭州的阿里巴巴做软件工程师。", "created_at": said_at},
    ]  # fmt: skip
    log = tmp_path / "later.jsonl"
    log.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    ingest_logs(settings, [log], namespace=namespace, progress=False)
    extracted = extract_new(settings, namespace=namespace, progress=False)
    assert extracted.llm_calls + extracted.cache_hits >= 1, extracted

    with engine.connect() as conn:
        age = get_memory(conn, namespace, "u1", kind="fact", key="age")
        job = get_memory(conn, namespace, "u1", kind="fact", key="job_title")
        document = get_profile(conn, namespace, "u1", "work")
    assert age is not None and (age.value, age.source) == (35, "manual")
    assert job is not None and job.source == "extracted", "the rest of the message is still extracted"
    assert job.value != "数据工程师", "extraction wrote its own value to L2"
    assert document.content["occupation"] == "数据工程师", "the manual field holds"
