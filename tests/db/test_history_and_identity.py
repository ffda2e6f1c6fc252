"""Attacks by an agent role granted one namespace on what sits beside row-level security: forging another
namespace's L2 history, rewriting its own history behind the store, and choosing identity values."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import DBAPIError

from strataflow.config import Settings
from strataflow.db import roles
from strataflow.db.engine import libpq_url, sqlalchemy_url
from strataflow.memory import api as memory_api

FORGE_VERSION = text(
    """
    insert into memory_item_versions (item_id, namespace, subject_id, kind, key, version, action, value,
        statement, status, source, valid_from)
    values (:item_id, :ns, 'u1', 'fact', 'city', 99, 'content_modified', '"forged value"', 'forged statement',
        'active', 'manual', :at)
    """
)
IDENTITY_TABLES = text(
    """
    select c.relname, a.attname
    from pg_class as c
    join pg_namespace as n on n.oid = c.relnamespace
    join pg_attribute as a on a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
    where n.nspname = 'public' and c.relkind in ('r', 'p') and not c.relispartition and a.attidentity <> ''
    order by c.relname
    """
)


@pytest.fixture(scope="module")
def scopes(engine: Engine) -> dict[str, str]:
    """Two namespaces with one item each (city), written through the store as the pipeline does."""
    suffix = uuid.uuid4().hex[:6]
    names = {"own": f"ho_{suffix}", "other": f"hx_{suffix}"}
    with engine.begin() as conn:
        for label, namespace in names.items():
            memory_api.create_memory(
                conn, namespace, "u1", "fact", "city", label, statement=f"lives in {label}"
            )
    return names


@pytest.fixture(scope="module")
def agent(settings: Settings, engine: Engine, scopes: dict[str, str]) -> Iterator[Engine]:
    name = f"agent_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        password = roles.create_role(conn, name, "agent")
        roles.grant(conn, name, scopes["own"])
    role_engine = create_engine(sqlalchemy_url(roles.role_url(libpq_url(settings), name, password)))
    yield role_engine
    role_engine.dispose()


def _item_id(engine: Engine, namespace: str) -> int:
    with engine.connect() as conn:
        query = text("select item_id from memory_items where namespace = :ns")
        return int(conn.execute(query, {"ns": namespace}).scalar_one())


def _forged_rows(engine: Engine) -> int:
    with engine.connect() as conn:
        query = text("select count(*) from memory_item_versions where statement = 'forged statement'")
        return int(conn.execute(query).scalar_one())


def _attempt(role_engine: Engine, statement: str, params: dict[str, object] | None = None) -> str | None:
    """Run statement as the role; the database's refusal, or None when it went through (and committed)."""
    try:
        with role_engine.begin() as conn:
            conn.execute(text(statement), params or {})
    except DBAPIError as exc:
        return str(exc.orig)
    return None


def test_an_agent_cannot_forge_history_for_another_namespaces_item(
    agent: Engine, engine: Engine, scopes: dict[str, str]
) -> None:
    victim = _item_id(engine, scopes["other"])
    at = datetime.now(UTC)
    # Labelled with its own namespace (which its policy lets it write) and with the victim's.
    for namespace in (scopes["own"], scopes["other"]):
        refusal = _attempt(agent, FORGE_VERSION.text, {"item_id": victim, "ns": namespace, "at": at})
        assert refusal is not None and "permission denied" in refusal
    assert _forged_rows(engine) == 0
    with engine.connect() as conn:
        as_of = conn.execute(
            text("select value from memory_as_of(now(), now(), :ns) where item_id = :id"),
            {"ns": scopes["other"], "id": victim},
        ).scalar_one()
        history = memory_api.memory_history(conn, scopes["other"], victim)
    assert as_of == "other" and [v.value for v in history] == ["other"]


def test_history_rows_must_sit_in_their_items_namespace_even_for_the_owner(
    engine: Engine, scopes: dict[str, str]
) -> None:
    victim = _item_id(engine, scopes["other"])
    with pytest.raises(DBAPIError, match="memory_item_versions_item_fkey"):
        with engine.begin() as conn:
            conn.execute(FORGE_VERSION, {"item_id": victim, "ns": scopes["own"], "at": datetime.now(UTC)})


def test_history_and_as_of_reads_are_scoped_by_namespace(engine: Engine, scopes: dict[str, str]) -> None:
    victim = _item_id(engine, scopes["other"])
    with engine.connect() as conn:
        with pytest.raises(memory_api.MemoryNotFound):
            memory_api.memory_history(conn, scopes["own"], victim)
        as_of_own = conn.execute(
            text("select count(*) from memory_as_of(now(), now(), :ns) where item_id = :id"),
            {"ns": scopes["own"], "id": victim},
        ).scalar_one()
    assert as_of_own == 0


@pytest.mark.parametrize(
    "statement",
    [
        "update memory_item_versions set statement = 'forged statement' where true",
        "delete from memory_item_versions where true",
        "delete from memory_items where true",  # would take the items' history with them
    ],
)
def test_an_agent_cannot_rewrite_or_erase_history_of_its_own_namespace(
    agent: Engine, engine: Engine, scopes: dict[str, str], statement: str
) -> None:
    own = _item_id(engine, scopes["own"])
    refusal = _attempt(agent, statement)
    assert refusal is not None and (
        "permission denied" in refusal or "memory_item_versions_item_fkey" in refusal
    )
    with engine.connect() as conn:
        versions = conn.execute(
            text(
                "select count(*) from memory_item_versions"
                " where item_id = :id and statement <> 'forged statement'"
            ),
            {"id": own},
        ).scalar_one()
    assert versions == 1 and _forged_rows(engine) == 0


def test_an_agent_cannot_call_the_history_functions_for_another_namespace(
    agent: Engine, engine: Engine, scopes: dict[str, str]
) -> None:
    victim = _item_id(engine, scopes["other"])
    record = (
        "select strataflow_record_item_version(:id, 99, 'content_modified', '\"forged value\"', "
        "'forged statement', null, null, null, 'active', 'manual', now(), null, false, '{}', null, null, "
        "null, null"
    )
    refusals = [
        _attempt(agent, record + ")", {"id": victim}),
        _attempt(agent, record + ", 'postgres')", {"id": victim}),  # claiming to be someone else
        _attempt(agent, "select strataflow_close_item_version(:id, 1, now())", {"id": victim}),
    ]
    assert all(r is not None and "may not write the history" in r for r in refusals)
    assert _forged_rows(engine) == 0


def test_an_agent_cannot_choose_an_identity_value_on_any_table(
    agent: Engine, engine: Engine, scopes: dict[str, str]
) -> None:
    with engine.connect() as conn:
        identity_columns = conn.execute(IDENTITY_TABLES).all()
    assert {"memory_items", "memory_item_versions", "profile_documents"} <= {t for t, _ in identity_columns}
    chosen = 987_654_321
    accepted = {}
    for table, column in identity_columns:
        statement = (
            f'insert into "{table}" ("{column}") overriding system value values ({chosen})'
            if table != "memory_items"
            else f"insert into memory_items (item_id, namespace, subject_id, kind, key, valid_from) "
            f"overriding system value values ({chosen}, '{scopes['own']}', 'u1', 'fact', 'forged_key', now())"
        )
        refusal = _attempt(agent, statement)
        if refusal is None or "permission denied" not in refusal:
            accepted[table] = refusal
    assert accepted == {}
    with engine.connect() as conn:
        assert (
            conn.execute(text("select count(*) from memory_items where item_id = :i"), {"i": chosen}).scalar()
            == 0
        )


def test_an_agent_still_writes_its_own_items_and_their_history_through_the_store(
    agent: Engine, engine: Engine, scopes: dict[str, str]
) -> None:
    with agent.begin() as conn:
        saved = memory_api.create_memory(conn, scopes["own"], "u2", "preference", "drink", "tea")
        changed = memory_api.update_memory(conn, scopes["own"], saved.item.id, value="coffee")
        history = memory_api.memory_history(conn, scopes["own"], saved.item.id)
    assert (saved.action, changed.action) == ("new", "content_modified")
    assert [(v.version, v.value, v.superseded_at is not None) for v in history] == [
        (1, "tea", True),
        (2, "coffee", False),
    ]
