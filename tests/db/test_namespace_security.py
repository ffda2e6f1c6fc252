"""Row-level security: a role granted one namespace sees and writes nothing of another, in any relation."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import DBAPIError, ProgrammingError

from strataflow.config import Settings
from strataflow.db import roles
from strataflow.db.engine import libpq_url, sqlalchemy_url

INSERT_KEY = text(
    """
    insert into message_keys (namespace, source, source_message_id, subject_id, conversation_id, event_at,
                              content_hash)
    values (:ns, 'iso', :mid, 'subj', 'conv', :at, 'h') returning message_id
    """
)
INSERT_MESSAGE = text(
    """
    insert into conversation_messages (message_id, namespace, subject_id, conversation_id, source,
        source_message_id, role, content, content_hash, event_at, expires_at)
    values (:id, :ns, 'subj', 'conv', 'iso', :mid, 'user', :content, 'h', :at, :at + interval '30 days')
    """
)
INSERT_ITEM = text(
    """
    insert into memory_items (namespace, subject_id, kind, key, value, statement, valid_from)
    values (:ns, 'subj', 'fact', 'age', '32', :statement, now())
    """
)


def _seed(engine: Engine, namespace: str) -> None:
    at = datetime(2026, 11, 2, 9, tzinfo=UTC)
    with engine.begin() as conn:
        conn.execute(text("select ensure_message_partitions(:a, :a)"), {"a": at})
        message_id = conn.execute(INSERT_KEY, {"ns": namespace, "mid": "m1", "at": at}).scalar()
        conn.execute(
            INSERT_MESSAGE,
            {
                "id": message_id,
                "ns": namespace,
                "mid": "m1",
                "at": at,
                "content": "'); drop table memory_items; --",
            },
        )
        conn.execute(INSERT_ITEM, {"ns": namespace, "statement": f"{namespace} is 32"})


@pytest.fixture(scope="module")
def scopes(engine: Engine) -> dict[str, str]:
    suffix = uuid.uuid4().hex[:6]
    names = {"alpha": f"alpha_{suffix}", "beta": f"beta_{suffix}"}
    for namespace in names.values():
        _seed(engine, namespace)
    return names


def _role_engine(settings: Settings, engine: Engine, kind: str, namespace: str) -> Iterator[Engine]:
    name = f"{kind}_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        password = roles.create_role(conn, name, kind)
        roles.grant(conn, name, namespace)
    role_engine = create_engine(sqlalchemy_url(roles.role_url(libpq_url(settings), name, password)))
    yield role_engine
    role_engine.dispose()


@pytest.fixture
def agent(settings: Settings, engine: Engine, scopes: dict[str, str]) -> Iterator[Engine]:
    yield from _role_engine(settings, engine, "agent", scopes["alpha"])


@pytest.fixture
def analyst(settings: Settings, engine: Engine, scopes: dict[str, str]) -> Iterator[Engine]:
    yield from _role_engine(settings, engine, "analyst", scopes["alpha"])


RELATIONS_WITH_NAMESPACE = text(
    """
    select c.relname from pg_class as c
    join pg_namespace as n on n.oid = c.relnamespace
    join pg_attribute as a on a.attrelid = c.oid and a.attname = 'namespace' and not a.attisdropped
    where c.relkind in ('r', 'v', 'm', 'p') and n.nspname = 'public'
    """
)


def test_agent_sees_no_row_of_another_namespace_in_any_relation(
    agent: Engine, engine: Engine, scopes: dict[str, str]
) -> None:
    with engine.connect() as conn:
        relations = conn.execute(RELATIONS_WITH_NAMESPACE).scalars().all()
    assert "conversation_messages" in relations and len(relations) >= 13
    leaks = {}
    with agent.connect() as conn:
        for relation in relations:  # partitions included: no privilege on them is isolation too
            try:
                with conn.begin_nested():
                    count = conn.execute(
                        text(f'select count(*) from "{relation}" where namespace = :ns'),
                        {"ns": scopes["beta"]},
                    ).scalar()
            except ProgrammingError:
                continue
            if count:
                leaks[relation] = count
        own = conn.execute(text("select count(*) from conversation_messages where true")).scalar()
        content = conn.execute(text("select content from conversation_messages")).scalar()
    assert leaks == {}
    assert own == 1
    assert content == "'); drop table memory_items; --"  # stored as data, never executed


@pytest.mark.parametrize(
    "attempt",
    [
        "reset role",  # back to the login role: still the agent
        "set role postgres",  # not a member: refused
        "set session authorization postgres",  # needs superuser: refused
        "select set_config('role', 'postgres', false)",  # the same through a function call
    ],
)
def test_crafted_sql_does_not_widen_access(agent: Engine, scopes: dict[str, str], attempt: str) -> None:
    with agent.connect() as conn:
        try:
            with conn.begin_nested():
                conn.execute(text(attempt))
        except DBAPIError:
            pass
        beta = conn.execute(
            text("select count(*) from memory_items where namespace = :ns or true"), {"ns": scopes["beta"]}
        ).scalar()
    assert beta == 1  # only its own alpha item


def test_agent_cannot_write_into_another_namespace(agent: Engine, scopes: dict[str, str]) -> None:
    with agent.connect() as conn:
        with pytest.raises(DBAPIError, match="row-level security"):
            with conn.begin():
                conn.execute(INSERT_ITEM.bindparams(ns=scopes["beta"], statement="planted"))
        with conn.begin():
            updated = conn.execute(
                text("update memory_items set statement = 'x' where namespace = :ns"), {"ns": scopes["beta"]}
            ).rowcount
        assert updated == 0


def test_analyst_reads_but_cannot_modify(analyst: Engine, scopes: dict[str, str]) -> None:
    with analyst.connect() as conn:
        assert conn.execute(text("select count(*) from memory_items")).scalar() == 1
        conn.commit()
        for statement in (
            "delete from conversation_messages",
            "update memory_items set statement = 'x'",
            "truncate memory_items",
            "drop table quarantine",
            "create table evil (id int)",
        ):
            with pytest.raises(DBAPIError, match="permission denied|must be owner"):
                with conn.begin():
                    conn.execute(text(statement))


def test_revoke_takes_effect_on_the_next_transaction(
    settings: Settings, engine: Engine, scopes: dict[str, str]
) -> None:
    name = f"agent_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        password = roles.create_role(conn, name, "agent")
        roles.grant(conn, name, scopes["alpha"])
    role_engine = create_engine(sqlalchemy_url(roles.role_url(libpq_url(settings), name, password)))
    with role_engine.connect() as agent_conn:
        assert agent_conn.execute(text("select count(*) from memory_items")).scalar() == 1
        agent_conn.commit()
        with engine.begin() as conn:
            assert roles.revoke(conn, name, scopes["alpha"])
        assert agent_conn.execute(text("select count(*) from memory_items")).scalar() == 0
    role_engine.dispose()
    assert [r for r in roles.list_roles(engine.connect()) if r.role_name == name][0].namespaces == []


def test_bad_role_requests_are_refused_clearly(engine: Engine) -> None:
    with engine.begin() as conn:
        with pytest.raises(roles.AccessError, match="lower snake_case"):
            roles.create_role(conn, 'x"; drop table memory_items; --', "agent", with_password=False)
        with pytest.raises(roles.AccessError, match="--kind must be agent or analyst"):
            roles.create_role(conn, "someone", "admin", with_password=False)
        with pytest.raises(roles.AccessError, match="no role 'ghost'"):
            roles.grant(conn, "ghost", "alpha")


def test_an_agent_cannot_list_the_namespaces_of_another_role(
    agent: Engine, analyst: Engine, scopes: dict[str, str]
) -> None:
    with analyst.connect() as conn:
        analyst_name = conn.execute(text("select current_user")).scalar()
    with agent.connect() as conn:
        own = conn.execute(text("select strataflow_visible_namespaces(current_user)")).scalars().all()
        other = (
            conn.execute(text("select strataflow_visible_namespaces(:r)"), {"r": analyst_name})
            .scalars()
            .all()
        )
        missing = conn.execute(text("select strataflow_visible_namespaces('no_such_role')")).scalars().all()
    assert own == [scopes["alpha"]]
    assert other == [] and missing == []


def test_access_cli_reports_a_bad_request_as_one_line_and_exit_1(engine: Engine) -> None:
    from typer.testing import CliRunner

    from strataflow.cli import app

    bad = CliRunner().invoke(app, ["access", "create-role", "Bad-Name", "--kind", "agent"])
    ghost = CliRunner().invoke(app, ["access", "grant", "ghost_role", "--namespace", "alpha"])
    assert (bad.exit_code, ghost.exit_code) == (1, 1)
    assert "error: role name 'Bad-Name' must be lower snake_case" in bad.output
    assert "error: no role 'ghost_role'" in ghost.output
    assert bad.exception is None or isinstance(bad.exception, SystemExit)
