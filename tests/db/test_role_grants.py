"""Attacks on grants and role switching: a role dropped and created again under the same name must not
inherit its namesake's namespaces, and as_role must not switch to a group, the pipeline or a superuser."""

from __future__ import annotations

import uuid

import pytest
from sqlalchemy import Engine, text

from strataflow.db import roles
from strataflow.memory import api as memory_api


@pytest.fixture(scope="module")
def secret_namespace(engine: Engine) -> str:
    namespace = f"rg_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        memory_api.create_memory(
            conn, namespace, "u1", "fact", "passport", "E1234567", statement="passport E1234567"
        )
    return namespace


def _visible_items(engine: Engine, role: str) -> int:
    with engine.connect() as conn, conn.begin():
        roles.as_role(conn, role)
        return int(conn.execute(text("select count(*) from memory_items")).scalar_one())


@pytest.mark.parametrize("recreate", ["raw_sql", "create_role"])
def test_a_recreated_role_starts_without_its_namesakes_grants(
    engine: Engine, secret_namespace: str, recreate: str
) -> None:
    name = f"agent_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        roles.create_role(conn, name, "agent")
        roles.grant(conn, name, secret_namespace)
    assert _visible_items(engine, name) == 1
    with engine.begin() as conn:
        conn.execute(text(f'drop role "{name}"'))  # dropped behind strataflow's back
        if recreate == "raw_sql":
            conn.execute(text(f'create role "{name}" login in role strataflow_agent'))
        else:
            roles.create_role(conn, name, "agent")
    assert _visible_items(engine, name) == 0
    with engine.connect() as conn:
        listed = [r for r in roles.list_roles(conn) if r.role_name == name]
        own = conn.execute(
            text("select count(*) from namespace_grants where role_name = :r"), {"r": name}
        ).scalar_one()
    assert [r.namespaces for r in listed] == [[]]
    assert own == (1 if recreate == "raw_sql" else 0)  # a stale row may stay, but it grants nothing


def test_access_list_shows_only_live_roles(engine: Engine, secret_namespace: str) -> None:
    name = f"agent_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        roles.create_role(conn, name, "agent")
        roles.grant(conn, name, secret_namespace)
        conn.execute(text(f'drop role "{name}"'))
    with engine.connect() as conn:
        assert name not in {r.role_name for r in roles.list_roles(conn)}


@pytest.mark.parametrize(
    ("role", "why"),
    [
        ("strataflow_pipeline", "the pipeline group sees every namespace"),
        ("strataflow_agent", "a group, not a login role"),
        ("strataflow_analyst", "a group, not a login role"),
        ("postgres", "the superuser"),
    ],
)
def test_as_role_refuses_groups_and_the_superuser(engine: Engine, role: str, why: str) -> None:
    with engine.connect() as conn, conn.begin():
        with pytest.raises(roles.AccessError):
            roles.as_role(conn, role)
        assert conn.execute(text("select current_user")).scalar() == "postgres", why


def test_as_role_refuses_a_login_role_outside_the_agent_and_analyst_groups(
    engine: Engine, secret_namespace: str
) -> None:
    pipeline_login, nologin_agent = f"pipe_{uuid.uuid4().hex[:8]}", f"agent_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        conn.execute(text(f'create role "{pipeline_login}" login in role strataflow_pipeline'))
        conn.execute(text(f'create role "{nologin_agent}" nologin in role strataflow_agent'))
    for role in (pipeline_login, nologin_agent):
        with engine.connect() as conn, conn.begin():
            with pytest.raises(roles.AccessError, match="not an agent or analyst login role"):
                roles.as_role(conn, role)
            seen = conn.execute(
                text("select count(*) from memory_items where namespace = :ns"), {"ns": secret_namespace}
            ).scalar_one()
            assert (conn.execute(text("select current_user")).scalar(), seen) == ("postgres", 1)
