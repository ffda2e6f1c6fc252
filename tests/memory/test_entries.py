"""Seed 003 entries through the one L2 API (strataflow.memory.api and its item_fields): names in any language,
the seed's types, agent scope, versioned updates, paging, search, and the memory system prompt."""

from __future__ import annotations

import pytest
from sqlalchemy import Connection, text

from strataflow.config import Settings
from strataflow.memory import api, item_fields
from strataflow.memory.prompts import memory_system_prompt
from strataflow.retrieval.item_search import search_memories


def test_an_entry_with_a_chinese_name_comes_back_with_its_name_type_and_kind(
    conn: Connection, namespace: str
) -> None:
    saved = api.create_memory(
        conn,
        namespace,
        "u1",
        "user",
        "用户偏好-简洁风格",
        "用户偏好简洁直接的回答风格",
        description="回答风格",
    ).item
    fetched = api.get_memory(conn, namespace, saved.id)
    assert fetched == saved
    assert (saved.name, saved.type, saved.kind, saved.description, saved.content, saved.version) == (
        "用户偏好-简洁风格", "user", "fact", "回答风格", "用户偏好简洁直接的回答风格", 1,
    )  # fmt: skip
    assert (saved.source, saved.status, saved.agent, saved.shared) == ("manual", "active", None, False)


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("job_title", "job_title"),  # already a key: kept as it is
        ("用户偏好-简洁风格", "entry_" + "86ef418ff0"),  # no ASCII words: a hash of the name
        ("Sprint goal: Q3", None),  # ASCII words + a hash, so "sprint goal q3" cannot collide with it
    ],
)
def test_the_key_of_a_name_is_stable_and_distinct_names_get_distinct_keys(name: str, key: str | None) -> None:
    assert item_fields.name_key(name) == item_fields.name_key(f"  {name} ")
    if key is not None:
        assert item_fields.name_key(name) == key
    else:
        assert item_fields.name_key(name).startswith("sprint_goal_q3_")
    assert item_fields.name_key(name) != item_fields.name_key(name + "x")


def test_a_name_is_unique_per_subject_and_agent_and_an_agents_entry_is_private_unless_shared(
    conn: Connection, namespace: str, settings: Settings
) -> None:
    private = api.create_memory(
        conn, namespace, "u1", "project", "三季度计划", "Q3 focus: Lisbon office", agent_id="a"
    ).item
    with pytest.raises(api.MemoryConflict, match=f"item {private.id} already has the name '三季度计划'"):
        api.create_memory(conn, namespace, "u1", "project", "三季度计划", "again", agent_id="a")
    # the same name in another agent's scope is another entry (the identity includes the agent)
    other = api.create_memory(
        conn, namespace, "u1", "project", "三季度计划", "B's own plan", agent_id="b"
    ).item
    assert other.id != private.id and other.key == private.key
    shared = api.create_memory(
        conn,
        namespace,
        "u1",
        "reference",
        "handbook",
        "The Lisbon office handbook",
        agent_id="a",
        shared=True,
    ).item

    def visible(agent: str | None) -> set[int]:
        hits = search_memories(conn, settings, namespace, "Lisbon office", "u1", agent_id=agent)
        return {hit.id for hit in hits}

    assert visible("a") == {private.id, shared.id}
    assert visible("b") == {shared.id}  # B sees A's shared entry, never A's private one
    assert visible(None) == {shared.id}  # no agent: no agent's private entries
    with pytest.raises(api.MemoryNotFound):
        api.get_memory(conn, namespace, private.id, agent_id="b")
    with pytest.raises(api.MemoryForbidden, match="belongs to agent 'a'"):
        api.update_memory(conn, namespace, shared.id, agent_id="b", value="B rewrites it")
    with pytest.raises(api.MemoryNotFound):
        api.get_memory(conn, f"{namespace}_other", private.id, agent_id="a")


def test_update_changes_type_name_and_description_with_history(conn: Connection, namespace: str) -> None:
    saved = api.create_memory(
        conn, namespace, "u1", "feedback", "不要自动格式化代码", "Do not reformat code"
    ).item
    updated = api.update_memory(
        conn, namespace, saved.id, type="user", name="Code style", description="before editing code"
    ).item
    assert (updated.id, updated.type, updated.kind, updated.name, updated.key, updated.version) == (
        saved.id, "user", "fact", "Code style", item_fields.name_key("Code style"), 2,
    )  # fmt: skip
    assert (updated.description, updated.content) == ("before editing code", "Do not reformat code")
    content = api.update_memory(conn, namespace, saved.id, value="Never reformat code").item
    deleted = api.delete_memory(conn, namespace, saved.id).item
    history = api.memory_history(conn, namespace, saved.id)
    assert [(v.version, v.action, v.type, v.name, v.content) for v in history] == [
        (1, "new", "feedback", "不要自动格式化代码", "Do not reformat code"),
        (2, "modified", "user", "Code style", "Do not reformat code"),
        (3, "content_modified", "user", "Code style", "Never reformat code"),
        (4, "deleted", "user", "Code style", "Never reformat code"),
    ]
    assert (content.version, deleted.status) == (3, "deleted")
    with pytest.raises(api.MemoryNotFound):
        api.get_memory(conn, namespace, saved.id)
    # a deleted name may be saved again: the entry comes back as a new version of itself
    again = api.create_memory(conn, namespace, "u1", "user", "Code style", "Reformat only on request").item
    assert (again.id, again.version, again.status) == (saved.id, 5, "active")


def test_renaming_onto_a_taken_name_is_a_conflict_and_bad_fields_are_named(
    conn: Connection, namespace: str
) -> None:
    first = api.create_memory(conn, namespace, "u1", "project", "alpha", "first").item
    api.create_memory(conn, namespace, "u1", "project", "beta", "second")
    with pytest.raises(api.MemoryConflict):
        api.update_memory(conn, namespace, first.id, name="beta")
    for call, field in [
        (lambda: api.create_memory(conn, namespace, "u1", "diary", "x", "y"), "type"),
        (lambda: api.create_memory(conn, namespace, "u1", "user", " ", "y"), "name"),
        (lambda: api.create_memory(conn, namespace, "u1", "user", "n", "a\x00b"), "content"),
        (lambda: api.list_memories(conn, namespace, cursor="not-a-cursor"), "cursor"),
    ]:
        with pytest.raises(item_fields.MemoryFieldError) as caught:
            call()
        assert caught.value.field == field


def test_list_pages_through_every_entry_once_newest_first(conn: Connection, namespace: str) -> None:
    saved = [
        api.create_memory(conn, namespace, "u2", "project", f"note {n}", f"note number {n}").item
        for n in range(5)
    ]
    seen, cursor = [], None
    while True:
        page = api.list_memories(conn, namespace, "u2", limit=2, cursor=cursor)
        seen += [entry.id for entry in page.entries]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert seen == [entry.id for entry in reversed(saved)]
    assert [e.id for e in api.list_memories(conn, namespace, "u2", type="user").entries] == []


def test_search_finds_an_entry_by_its_chinese_name_and_an_extracted_item_reads_as_an_entry(
    conn: Connection, namespace: str, settings: Settings
) -> None:
    saved = api.create_memory(
        conn, namespace, "u3", "feedback", "用户偏好-简洁风格", "prefers plain short answers"
    ).item
    conn.execute(
        text(
            "insert into memory_items (namespace, subject_id, kind, key, value, statement, valid_from) "
            "values (:ns, 'u3', 'fact', 'company', '\"Quintessa\"', 'works at Quintessa', now())"
        ),
        {"ns": namespace},
    )
    assert [hit.id for hit in search_memories(conn, settings, namespace, "简洁风格", "u3")] == [saved.id]
    (company,) = search_memories(conn, settings, namespace, "Quintessa", "u3")
    assert (company.name, company.type, company.content, company.source) == (
        "company", "fact", "Quintessa", "extracted",
    )  # fmt: skip


def test_the_memory_system_prompt_is_the_seed_section_in_chinese_and_in_english() -> None:
    zh, en = memory_system_prompt("zh"), memory_system_prompt("en")
    assert zh.startswith("## 记忆系统") and "更新已有记忆而非创建重复条目" in zh
    assert en.startswith("## Memory system") and "instead of creating a duplicate" in en
    for section in (zh, en):
        assert all(
            word in section for word in ("memory_save", "memory_recall", "user", "project", "feedback")
        )
    with pytest.raises(ValueError, match="'fr'"):
        memory_system_prompt("fr")  # type: ignore[arg-type]
