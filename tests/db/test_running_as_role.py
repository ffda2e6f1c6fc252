"""Code run under a role (roles.as_role): the memory API and the context builder see only the role's
namespace, an agent writes its own L2 items, and forget still works for a pipeline role with RLS on."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import SecretStr
from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError

from strataflow.config import Settings
from strataflow.db import passwords, roles
from strataflow.db.engine import libpq_url
from strataflow.memory import api as memory_api
from strataflow.pipeline.extract import extract_new
from strataflow.pipeline.forget import forget_subject
from strataflow.pipeline.ingest import ingest_logs
from strataflow.retrieval.context import build_context
from strataflow.retrieval.item_search import search_memories

SUBJECT = "u1"
WORDS = {"alpha": "Lisbon", "beta": "Reykjavik"}  # each namespace's city; the other must never show up


def _write_messages(path: Path, city: str, at: datetime | None = None) -> Path:
    now = at or datetime.now(UTC) - timedelta(minutes=5)
    texts = [f"I moved to {city} last year.", f"My favourite cafe in {city} is small."]
    records = [
        {"conversation_id": "c1", "subject_id": SUBJECT, "source_message_id": f"m{i}", "role": "user",
         "content": content, "created_at": (now + timedelta(seconds=i)).isoformat()}
        for i, content in enumerate(texts)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def scopes(settings: Settings, engine: Engine, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Two fresh namespaces with the same subject: an L2 item each and two of today's messages each."""
    suffix = uuid.uuid4().hex[:6]
    names = {"alpha": f"ra_{suffix}", "beta": f"rb_{suffix}"}
    folder = tmp_path_factory.mktemp("as-role")
    for label, namespace in names.items():
        city = WORDS[label]
        with engine.begin() as conn:
            memory_api.create_memory(
                conn, namespace, SUBJECT, "fact", "city", city, statement=f"Lives in {city}"
            )
        ingest_logs(
            settings, [_write_messages(folder / f"{label}.jsonl", city)], namespace=namespace, progress=False
        )
    return names


@pytest.fixture(scope="module")
def agent(engine: Engine, scopes: dict[str, str]) -> str:
    name = f"agent_{uuid.uuid4().hex[:8]}"
    with engine.begin() as conn:
        roles.create_role(conn, name, "agent", with_password=False)
        roles.grant(conn, name, scopes["alpha"])
    return name


def test_the_memory_api_under_an_agent_role_returns_only_its_namespace(
    engine: Engine, settings: Settings, scopes: dict[str, str], agent: str
) -> None:
    alpha, beta = scopes["alpha"], scopes["beta"]
    with engine.connect() as conn, conn.begin():
        roles.as_role(conn, agent)
        assert conn.execute(text("select current_user")).scalar() == agent
        (own,) = memory_api.list_memories(conn, alpha, SUBJECT).entries
        assert own.value == "Lisbon"
        assert memory_api.list_memories(conn, beta, SUBJECT).entries == []  # asking for beta gives nothing
        with pytest.raises(memory_api.MemoryNotFound):
            memory_api.find_memory(conn, beta, SUBJECT, "fact", "city")
        assert search_memories(conn, settings, beta, "Reykjavik") == []
        assert [h.id for h in search_memories(conn, settings, alpha, "Lisbon")] == [own.id]
    with engine.connect() as conn:
        beta_city = memory_api.find_memory(conn, beta, SUBJECT, "fact", "city")
    with engine.connect() as conn, conn.begin():
        roles.as_role(conn, agent)
        with pytest.raises(memory_api.MemoryNotFound):
            memory_api.update_memory(conn, beta, beta_city.id, value="planted")


def test_the_context_builder_under_an_agent_role_returns_only_its_namespace(
    settings: Settings, engine: Engine, scopes: dict[str, str], agent: str
) -> None:
    with engine.connect() as conn, conn.begin():
        roles.as_role(conn, agent)
        own = build_context(
            conn, settings, scopes["alpha"], SUBJECT, "where do I live? Lisbon Reykjavik cafe"
        )
        other = build_context(
            conn, settings, scopes["beta"], SUBJECT, "where do I live? Lisbon Reykjavik cafe"
        )
    assert "Lisbon" in own.text and "Reykjavik" not in own.text
    assert {p.layer for p in own.pieces} >= {"L1", "L2"}
    assert other.pieces == [] and "Reykjavik" not in other.text
    # The same call as the superuser does see beta: the role made the difference.
    with engine.connect() as conn:
        assert "Reykjavik" in build_context(conn, settings, scopes["beta"], SUBJECT, "where do I live?").text


def test_an_agent_role_saves_updates_and_deletes_its_own_items_through_the_memory_api(
    engine: Engine, scopes: dict[str, str], agent: str
) -> None:
    alpha, beta = scopes["alpha"], scopes["beta"]
    with engine.connect() as conn:
        with conn.begin():
            roles.as_role(conn, agent)
            saved = memory_api.create_memory(
                conn, alpha, SUBJECT, "preference", "drink", "tea", agent_id="bot"
            )
            updated = memory_api.update_memory(conn, alpha, saved.item.id, agent_id="bot", value="coffee")
            deleted = memory_api.delete_memory(conn, alpha, saved.item.id, agent_id="bot")
            history = memory_api.memory_history(conn, alpha, saved.item.id, agent_id="bot")
        with pytest.raises(DBAPIError, match="row-level security"):
            with conn.begin():
                roles.as_role(conn, agent)
                memory_api.create_memory(conn, beta, SUBJECT, "fact", "planted", "yes")
    assert (saved.action, updated.action, deleted.action) == ("new", "content_modified", "deleted")
    assert [(v.action, v.value) for v in history] == [
        ("new", "tea"),
        ("content_modified", "coffee"),
        ("deleted", "coffee"),
    ]
    with engine.connect() as conn:
        beta_keys = conn.execute(text("select key from memory_items where namespace = :ns"), {"ns": beta})
        assert beta_keys.scalars().all() == ["city"]


def test_the_role_ends_with_its_transaction_and_bad_names_are_refused(
    engine: Engine, scopes: dict[str, str], agent: str
) -> None:
    with engine.connect() as conn:
        with conn.begin():
            roles.as_role(conn, agent)
            assert memory_api.list_memories(conn, scopes["beta"], SUBJECT).entries == []
        with conn.begin():  # set local role ended with the commit: the login role again
            assert conn.execute(text("select current_user")).scalar() != agent
            assert len(memory_api.list_memories(conn, scopes["beta"], SUBJECT).entries) == 1
            with pytest.raises(roles.AccessError, match="lower snake_case"):
                roles.as_role(conn, 'x"; reset role; --')
            with pytest.raises(roles.AccessError, match="no role 'nobody_here'"):
                roles.as_role(conn, "nobody_here")


@pytest.fixture
def pipeline_settings(settings: Settings, engine: Engine) -> Settings:
    """Settings that log in as a non-superuser member of strataflow_pipeline: RLS applies to it for real."""
    name, password = f"pipe_{uuid.uuid4().hex[:8]}", passwords.generate_password()
    with engine.begin() as conn:
        conn.execute(text(f'create role "{name}" login inherit in role strataflow_pipeline'))
        passwords.set_password(conn.connection.dbapi_connection, name, password)
    url = roles.role_url(libpq_url(settings), name, password)
    return settings.model_copy(update={"database_url": SecretStr(url)})


def _week_without_partition(engine: Engine) -> datetime:
    with engine.connect() as conn:
        for week in range(520):
            moment = datetime(2010, 1, 4, 9, tzinfo=UTC) + timedelta(weeks=week)
            name = f"conversation_messages_w{moment:%G_%V}"
            if conn.execute(text("select to_regclass(:p)"), {"p": name}).scalar() is None:
                return moment
    raise AssertionError("every week of 2010-2019 has a partition")


def test_a_pipeline_role_ingests_and_extracts_bound_by_row_level_security(
    pipeline_settings: Settings, engine: Engine, tmp_path: Path
) -> None:
    namespace = f"rp_{uuid.uuid4().hex[:8]}"
    moment = _week_without_partition(engine)  # so the role must create one
    partition = f"conversation_messages_w{moment:%G_%V}"
    logs = _write_messages(tmp_path / "pipe.jsonl", "Austin", moment)
    ingested = ingest_logs(pipeline_settings, [logs], namespace=namespace, progress=False)
    extracted = extract_new(pipeline_settings, namespace=namespace, progress=False)
    assert (ingested.inserted, extracted.messages, extracted.errors) == (2, 2, [])
    with engine.connect() as conn:
        partitions = conn.execute(
            text("select count(*) from pg_inherits as i join pg_class as c on c.oid = i.inhrelid"
                 " where i.inhparent = 'conversation_messages'::regclass"
                 " and has_table_privilege('strataflow_pipeline', c.oid, 'select')")
        ).scalar()  # fmt: skip
        created = conn.execute(text("select to_regclass(:p)"), {"p": partition}).scalar()
    # The partition it created exists, and no group has a privilege on any partition.
    assert created is not None and partitions == 0


def test_forget_works_with_row_level_security_on(
    pipeline_settings: Settings, engine: Engine, scopes: dict[str, str], agent: str
) -> None:
    alpha, beta = scopes["alpha"], scopes["beta"]
    with engine.connect() as conn:
        rolsuper = conn.execute(
            text("select rolsuper from pg_roles where rolname = :r"),
            {"r": libpq_url(pipeline_settings).split("://")[1].split("@")[0].split(":")[0]},
        ).scalar()
    assert rolsuper is False
    result = forget_subject(pipeline_settings, beta, SUBJECT)
    assert result.counts["memory_items"] == 1 and result.counts["conversation_messages"] == 2
    with engine.connect() as conn:
        left = conn.execute(
            text(
                "select (select count(*) from memory_items where namespace = :ns)"
                " + (select count(*) from conversation_messages where namespace = :ns)"
                " + (select count(*) from message_keys where namespace = :ns)"
            ),
            {"ns": beta},
        ).scalar()
        kept = conn.execute(
            text("select count(*) from conversation_messages where namespace = :ns"), {"ns": alpha}
        ).scalar()
    assert (left, kept) == (0, 2)  # beta's subject is gone, alpha's same-named subject untouched
