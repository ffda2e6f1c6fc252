"""The one L2 memory API (strataflow.memory.api): create conflicts and says to update, update is explicit,
delete is versioned, one version reader, one error set, one visibility rule read the same way by every reader
(the API, search, the context builder, get_user_context, summarize), and the CLI on top of it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Connection, Engine
from typer.testing import CliRunner

from strataflow.config import Settings
from strataflow.memory import api, store
from strataflow.memory.item_fields import MemoryFieldError, normalize_kind
from strataflow.memory.user_memory import summarize
from strataflow.retrieval.context import build_context
from strataflow.retrieval.item_search import search_memories
from strataflow.retrieval.layer_sql import ItemFilter
from strataflow.retrieval.search import search
from strataflow.retrieval.user_context import get_user_context


def test_create_update_delete_round_trip_keeps_every_version(conn: Connection, namespace: str) -> None:
    saved = api.create_memory(conn, namespace, "u1", "fact", "age", 30, statement="I am 30", agent_id="a")
    assert saved.action == "new"
    assert (saved.item.value, saved.item.source, saved.item.version, saved.item.agent) == (
        30,
        "manual",
        1,
        "a",
    )

    updated = api.update_memory(conn, namespace, saved.item.id, agent_id="a", value=31)
    assert (updated.action, updated.item.id, updated.item.version) == ("content_modified", saved.item.id, 2)
    assert (updated.item.value, updated.item.statement) == (
        31,
        "age: 31",
    )  # a new value, its default statement
    assert api.get_memory(conn, namespace, saved.item.id, agent_id="a") == updated.item

    deleted = api.delete_memory(conn, namespace, saved.item.id, agent_id="a")
    assert (deleted.action, deleted.item.status, deleted.item.version) == ("deleted", "deleted", 3)
    with pytest.raises(api.MemoryNotFound):
        api.get_memory(conn, namespace, saved.item.id, agent_id="a")
    with pytest.raises(api.MemoryNotFound):
        api.delete_memory(conn, namespace, saved.item.id, agent_id="a")
    kept = api.get_memory(conn, namespace, saved.item.id, agent_id="a", include_deleted=True)
    assert kept.status == "deleted"

    history = api.memory_history(conn, namespace, saved.item.id, agent_id="a")
    assert [(v.version, v.action, v.value, v.source, v.agent) for v in history] == [
        (1, "new", 30, "manual", "a"),
        (2, "content_modified", 31, "manual", "a"),
        (3, "deleted", 31, "manual", "a"),
    ]
    assert history[0].superseded_at is not None and history[0].valid_to is not None
    assert history[-1].superseded_at is None


def test_create_on_a_taken_name_conflicts_and_names_the_item_to_update(
    conn: Connection, namespace: str
) -> None:
    first = api.create_memory(conn, namespace, "u1", "preference", "contact_channel", "wechat")
    with pytest.raises(api.MemoryConflict, match="update that item instead") as caught:
        api.create_memory(conn, namespace, "u1", "preference", "contact_channel", "email")
    assert caught.value.item_id == first.item.id
    with pytest.raises(api.MemoryConflict):  # the name is unique per (subject, agent), whatever the kind
        api.create_memory(conn, namespace, "u1", "fact", "contact_channel", "email")
    # another subject, or another agent's scope, is another item
    other_subject = api.create_memory(conn, namespace, "u2", "preference", "contact_channel", "email")
    agents_own = api.create_memory(conn, namespace, "u1", "preference", "contact_channel", "x", agent_id="a")
    assert len({first.item.id, other_subject.item.id, agents_own.item.id}) == 3
    # nothing changed: no new version
    same = api.update_memory(conn, namespace, first.item.id, value="wechat")
    assert (same.action, same.item.version) == ("unchanged", 1)
    assert len(api.memory_history(conn, namespace, first.item.id)) == 1
    # a deleted item of the same name and kind comes back as a new version of itself
    api.delete_memory(conn, namespace, first.item.id)
    again = api.create_memory(conn, namespace, "u1", "preference", "contact_channel", "phone")
    assert (again.action, again.item.id, again.item.version) == ("new", first.item.id, 3)


def test_seed_003_types_map_to_kinds_and_bad_input_names_the_field(conn: Connection, namespace: str) -> None:
    assert [normalize_kind(t) for t in ("user", "project", "Reference")] == ["fact", "meta", "reference"]
    saved = api.create_memory(conn, namespace, "u1", "project", "release_date", "2026-12-01")
    assert (saved.item.kind, saved.item.type, saved.item.key, saved.item.name) == (
        "meta", "project", "release_date", "release_date",
    )  # fmt: skip
    for call, field in [
        (lambda: api.create_memory(conn, namespace, "u1", "diary", "x", 1), "type"),
        (lambda: api.create_memory(conn, namespace, "u1", "fact", " ", 1), "name"),
        (lambda: api.create_memory(conn, namespace, "u1", "fact", "n", ""), "content"),
        (lambda: api.create_memory(conn, namespace, "u1", "fact", "n", 1, importance=101), "importance"),
        (lambda: api.list_memories(conn, namespace, limit=0), "limit"),
    ]:
        with pytest.raises(MemoryFieldError) as caught:
            call()
        assert caught.value.field == field
    with pytest.raises(api.MemoryNotFound, match="fact:height"):
        api.find_memory(conn, namespace, "u1", "fact", "height")


@pytest.fixture
def four_owners(conn: Connection, namespace: str) -> dict[str, int]:
    """One item of the namespace, one private to agent a, one private to b, one of b shared; same words."""
    ids = {}
    for label, agent, shared in (("team", None, False), ("mine", "a", False), ("theirs", "b", False),
                                 ("shared", "b", True)):  # fmt: skip
        saved = api.create_memory(
            conn, namespace, "u1", "project", f"launch_{label}", f"Lisbon office launch plan ({label})",
            agent_id=agent, shared=shared,
        )  # fmt: skip
        ids[label] = saved.item.id
    return ids


VISIBLE = {"a": {"team", "mine", "shared"}, "b": {"team", "theirs", "shared"}, None: {"team", "shared"}}


@pytest.mark.parametrize("viewer", ["a", "b", None])
def test_every_reader_applies_the_one_visibility_rule(
    conn: Connection, settings: Settings, namespace: str, four_owners: dict[str, int], viewer: str | None
) -> None:
    label_of = {item_id: label for label, item_id in four_owners.items()}
    want = VISIBLE[viewer]

    def labels(ids: list[int]) -> set[str]:
        return {label_of[i] for i in ids if i in label_of}

    listed = api.list_memories(conn, namespace, "u1", agent_id=viewer).entries
    found = search_memories(conn, settings, namespace, "Lisbon office launch", "u1", agent_id=viewer)
    ranked = search(
        conn, settings, namespace, "Lisbon office launch", "u1", layers=("items",), agent_id=viewer
    )
    context = build_context(conn, settings, namespace, "u1", "Lisbon office launch plan", agent_id=viewer)
    user_context = get_user_context(conn, settings, namespace, "u1", "Lisbon office launch", agent_id=viewer)
    assert labels([i.id for i in listed]) == want
    assert labels([h.id for h in found]) == want
    assert labels([h.id for h in ranked]) == want
    assert labels([i for p in context.pieces if p.layer == "L2" for i in p.ids]) == want
    assert labels([m.id for m in user_context.memories]) == want and user_context.total_memories == len(want)
    for label, item_id in four_owners.items():
        if label in want:
            assert api.get_memory(conn, namespace, item_id, agent_id=viewer).id == item_id
            assert len(api.memory_history(conn, namespace, item_id, agent_id=viewer)) == 1
        else:
            with pytest.raises(api.MemoryNotFound):
                api.get_memory(conn, namespace, item_id, agent_id=viewer)
            with pytest.raises(api.MemoryNotFound):
                api.memory_history(conn, namespace, item_id, agent_id=viewer)
            with pytest.raises(api.MemoryNotFound):
                api.update_memory(conn, namespace, item_id, agent_id=viewer, value="changed")


def _written_by(agent: str) -> ItemFilter:
    return ItemFilter("i.agent_id = :f_agent", {"f_agent": agent})


def test_an_agent_filter_finds_the_agents_items_among_many_closer_ones(
    conn: Connection, settings: Settings, namespace: str
) -> None:
    # Twelve shared memories about the query's topic and one agent's own, further from it: with limit 3 the
    # agent's item is not among the 3 best the agent sees, but it is the best of the agent's own.
    for i in range(12):
        text = f"The garden at home has {i + 2} beds."
        api.create_memory(conn, namespace, f"other{i}", "user", f"garden {i}", text, settings=settings)
    own = api.create_memory(
        conn,
        namespace,
        "u1",
        "user",
        "roof",
        "I keep bees on the roof.",
        agent_id="gardener",
        settings=settings,
    ).item.id
    query = "What is in the garden at home?"
    seen = search_memories(conn, settings, namespace, query, agent_id="gardener", limit=3)
    assert own not in [hit.id for hit in seen]  # the case the filter is for
    mine = search_memories(
        conn, settings, namespace, query, agent_id="gardener", limit=3, item_filter=_written_by("gardener")
    )
    assert [hit.id for hit in mine] == [own]
    nobody = _written_by("nobody")
    assert search_memories(conn, settings, namespace, query, agent_id="gardener", item_filter=nobody) == []


def test_only_the_owner_changes_an_agents_item_and_profiles_see_no_private_items(
    conn: Connection, namespace: str, four_owners: dict[str, int]
) -> None:
    for viewer in ("a", None):  # another agent, or a request without one: readable, not changeable
        assert api.get_memory(conn, namespace, four_owners["shared"], agent_id=viewer).shared
        with pytest.raises(api.MemoryForbidden, match="belongs to agent 'b'"):
            api.update_memory(conn, namespace, four_owners["shared"], agent_id=viewer, value="rewritten")
        with pytest.raises(api.MemoryForbidden):
            api.delete_memory(conn, namespace, four_owners["shared"], agent_id=viewer)
    changed = api.update_memory(conn, namespace, four_owners["shared"], agent_id="b", shared=False)
    assert (changed.action, changed.item.shared, changed.item.version) == ("modified", False, 2)
    with pytest.raises(api.MemoryNotFound):  # no longer shared: gone from a's view
        api.get_memory(conn, namespace, four_owners["shared"], agent_id="a")
    # any agent may change the namespace's own items
    assert api.update_memory(conn, namespace, four_owners["team"], agent_id="a", value="x").item.version == 2
    # summaries (and the profile documents, through the same rule) are the namespace's: an agent's private
    # item never reaches them, a shared one does
    private_age = api.create_memory(conn, namespace, "u1", "fact", "age", 40, agent_id="a")
    assert "age" not in summarize(conn, namespace, "u1").completeness.filled_fields
    api.update_memory(conn, namespace, private_age.item.id, agent_id="a", shared=True)
    assert "age" in summarize(conn, namespace, "u1").completeness.filled_fields


def test_chinese_queries_find_chinese_memories(conn: Connection, settings: Settings, namespace: str) -> None:
    company = api.create_memory(
        conn, namespace, "u1", "fact", "company", "阿里巴巴", statement="我在杭州的阿里巴巴做软件工程师"
    )
    school = api.create_memory(
        conn, namespace, "u1", "fact", "university", "复旦大学", statement="我是复旦大学计算机专业毕业的"
    )
    style = api.create_memory(
        conn,
        namespace,
        "u1",
        "preference",
        "meeting_style",
        "short",
        statement="I prefer short written summaries",
    )

    def ids(query: str, subject: str = "u1") -> list[int]:
        return [hit.id for hit in search_memories(conn, settings, namespace, query, subject)]

    assert ids("你在哪个公司工作？阿里巴巴")[:1] == [company.item.id]
    assert ids("复旦大学")[:1] == [school.item.id]
    assert ids("summaries preferred") == [style.item.id]
    assert ids("阿里巴巴", "someone-else") == []
    hit = search_memories(conn, settings, namespace, "复旦大学", "u1", type="fact", limit=1)
    assert [h.id for h in hit] == [school.item.id] and 0 < hit[0].score <= 1


def test_manual_edit_survives_a_later_extracted_value(conn: Connection, namespace: str) -> None:
    # extraction writes through the same store; a manual item is never silently overwritten
    saved = api.create_memory(
        conn, namespace, "u1", "fact", "age", 32, statement="32 (checked by the advisor)"
    )
    action = store.upsert_item(
        conn, namespace=namespace, subject_id="u1", kind="fact", key="age", value=28, statement="I am 28",
        source="extracted", event_at=datetime.now(UTC) + timedelta(minutes=1), source_message_ids=[1],
        prompt_version="extract-v1", model="offline/rules",
    )  # fmt: skip
    assert action == "manual_protected"
    current = api.get_memory(conn, namespace, saved.item.id)
    assert (current.value, current.source, current.version) == (32, "manual", 1)
    history = api.memory_history(conn, namespace, saved.item.id)
    assert [(v.value, v.note is not None) for v in history] == [(32, False), (28, True)]


def test_memory_cli_round_trip_commits_and_prints_json(namespace: str, settings: object) -> None:
    from strataflow.cli import app

    runner = CliRunner()
    scope = ["--namespace", namespace, "--subject", "u1"]
    by_key = ["--kind", "fact", "--key", "age"]
    saved = runner.invoke(app, ["memory", "save", *scope, *by_key, "--value", "30"])
    assert saved.exit_code == 0, saved.output
    item = json.loads(saved.stdout)["item"]
    assert (item["value"], item["key"], item["version"]) == (30, "age", 1)
    again = runner.invoke(app, ["memory", "save", *scope, *by_key, "--value", "31"])
    assert again.exit_code == 1 and f"--id {item['id']}" in again.stderr and "memory update" in again.stderr
    updated = runner.invoke(app, ["memory", "update", *scope, *by_key, "--value", "31"])
    assert updated.exit_code == 0 and json.loads(updated.stdout)["action"] == "content_modified"
    got = runner.invoke(app, ["memory", "get", *scope, "--id", str(item["id"]), "--history"])
    assert [v["value"] for v in json.loads(got.stdout)["history"]] == [30, 31]
    listed = runner.invoke(app, ["memory", "list", *scope])
    assert [json.loads(line)["id"] for line in listed.stdout.splitlines()] == [item["id"]]
    found = runner.invoke(app, ["memory", "search", *scope, "--query", "age"])
    assert json.loads(found.stdout.splitlines()[0])["id"] == item["id"]
    deleted = runner.invoke(app, ["memory", "delete", *scope, *by_key])
    assert deleted.exit_code == 0 and json.loads(deleted.stdout)["item"]["status"] == "deleted"
    missing = runner.invoke(app, ["memory", "delete", *scope, *by_key])
    assert missing.exit_code == 1 and "no active memory item fact:age" in missing.stderr


def test_manual_profile_edit_survives_the_next_extraction(
    engine: Engine, settings: Settings, namespace: str, tmp_path: Path
) -> None:
    from strataflow.memory.profiles import get_profile, patch_profile
    from strataflow.pipeline.extract import extract_new
    from strataflow.pipeline.ingest import ingest_logs

    with engine.begin() as conn:
        patch_profile(conn, namespace, "u1", "work", {"occupation": "数据工程师"})  # seed 002 PATCH
        age = api.create_memory(conn, namespace, "u1", "fact", "age", 35, statement="35 (from the passport)")
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
        kept = api.get_memory(conn, namespace, age.item.id)
        items = api.list_memories(conn, namespace, "u1").entries
        document = get_profile(conn, namespace, "u1", "work")
    assert (kept.value, kept.source, kept.version) == (35, "manual", 1)
    assert any(item.source == "extracted" for item in items), "the rest of the message is still extracted"
    assert document.content["occupation"] == "数据工程师", "the manual field holds"
