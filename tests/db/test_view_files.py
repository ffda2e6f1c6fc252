"""View files (sql/views/NAME.sql): a fresh database and one migrated by the old numbered files end with the
same views, re-applying changes nothing, and a re-created view keeps its owner, grants and readers' access."""

from __future__ import annotations

import shutil
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.exc import ProgrammingError

from strataflow.config import Settings
from strataflow.db import migrations, roles, views
from strataflow.db.engine import libpq_url, sqlalchemy_url

# The last numbered file before the view files existed: a database migrated up to here by the old files
# (views defined and redefined in 060-068, 142, 143 and 180) is what an existing installation has.
OLD_SET_LAST = "221_replace_message_key_time_index_with_brin.sql"
NEW_VIEWS = ("llm_cost_events",)  # view files added after OLD_SET_LAST, with no numbered file of their own

SNAPSHOT = text(
    """
    select c.relname, c.relkind,
           case when c.relkind = 'v' then pg_get_viewdef(c.oid) end as definition,
           coalesce(c.reloptions, '{}') as options,
           coalesce(c.relacl::text[], '{}') as acl,
           obj_description(c.oid, 'pg_class') as comment,
           array(
               select a.attname || ' ' || format_type(a.atttypid, a.atttypmod) || ' | '
                      || coalesce(col_description(c.oid, a.attnum), '')
               from pg_attribute as a
               where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
               order by a.attnum
           ) as columns
    from pg_class as c
    where c.relnamespace = 'public'::regnamespace and c.relkind in ('v', 'r', 'p') and not c.relispartition
    order by c.relname
    """
)
VIEW_OIDS = text(
    "select relname, oid::bigint from pg_class where relnamespace = 'public'::regnamespace and relkind = 'v'"
)
INSERT_ITEM = text(
    """
    insert into memory_items (namespace, subject_id, kind, key, value, statement, valid_from)
    values (:ns, 'subj', 'fact', 'age', '32', 'I am 32', now())
    """
)


def snapshot(engine: Engine) -> dict[str, dict[str, Any]]:
    with engine.connect() as conn:
        return {row.relname: dict(row._mapping) for row in conn.execute(SNAPSHOT)}


def view_oids(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {row.relname: row.oid for row in conn.execute(VIEW_OIDS)}


def copy_sql(target: Path, *, last: str | None = None, with_views: bool = True) -> Path:
    """sql/ as a directory of its own: the numbered files (up to `last`) and, with_views, sql/views/."""
    target.mkdir(parents=True, exist_ok=True)
    for path in sorted(migrations.SQL_DIR.glob("*.sql")):
        if last is None or path.name <= last:
            shutil.copy(path, target / path.name)
    if with_views:
        shutil.copytree(views.views_dir(migrations.SQL_DIR), views.views_dir(target))
    return target


class Scratch:
    """Empty databases on the embedded server (and login roles), dropped at the end."""

    def __init__(self, settings: Settings) -> None:
        self.base = libpq_url(settings)
        self.admin = create_engine(sqlalchemy_url(self.base), isolation_level="AUTOCOMMIT")
        self.names: list[str] = []
        self.engines: list[Engine] = []
        self.roles: list[str] = []

    def url(self, database: str) -> str:
        return self.base.replace("/postgres?", f"/{database}?")

    def database(self) -> tuple[str, Engine]:
        name = f"scratch_views_{uuid.uuid4().hex[:8]}"
        with self.admin.connect() as conn:
            conn.execute(text(f"create database {name}"))
        self.names.append(name)
        engine = create_engine(sqlalchemy_url(self.url(name)))
        self.engines.append(engine)
        return name, engine

    def role(self, engine: Engine, database: str, kind: str, namespace: str) -> Engine:
        """A login role of kind (agent, analyst) granted namespace, and an engine that logs in as it."""
        name = f"{kind}_{uuid.uuid4().hex[:8]}"
        with engine.begin() as conn:
            password = roles.create_role(conn, name, kind)
            roles.grant(conn, name, namespace)
        self.roles.append(name)
        role_engine = create_engine(sqlalchemy_url(roles.role_url(self.url(database), name, password)))
        self.engines.append(role_engine)
        return role_engine

    def close(self) -> None:
        for engine in self.engines:
            engine.dispose()
        with self.admin.connect() as conn:
            for name in self.names:
                conn.execute(text(f"drop database if exists {name} with (force)"))
            for role in self.roles:
                conn.execute(text(f'drop role if exists "{role}"'))
        self.admin.dispose()


@pytest.fixture(scope="module")
def scratch(engine: Engine, settings: Settings) -> Iterator[Scratch]:
    made = Scratch(settings)
    yield made
    made.close()


@pytest.fixture(scope="module")
def fresh(scratch: Scratch) -> Engine:
    """A new database migrated by today's sql/ in one upgrade."""
    _, engine = scratch.database()
    migrations.upgrade(engine)
    return engine


@pytest.fixture(scope="module")
def upgraded(scratch: Scratch, tmp_path_factory: pytest.TempPathFactory) -> Engine:
    """A database migrated by the old numbered files only (views of 060-068, 142, 143, 180), then upgraded."""
    _, engine = scratch.database()
    old = copy_sql(tmp_path_factory.mktemp("old-sql"), last=OLD_SET_LAST, with_views=False)
    migrations.upgrade(engine, old)
    # the old files made every view there was then (views added since come with the upgrade)
    assert len(view_oids(engine)) >= len(views.discover(migrations.SQL_DIR)) - len(NEW_VIEWS)
    migrations.upgrade(engine)
    return engine


def test_a_fresh_database_and_one_upgraded_from_the_old_files_have_the_same_views_and_comments(
    fresh: Engine, upgraded: Engine
) -> None:
    new, old = snapshot(fresh), snapshot(upgraded)
    assert sorted(name for name, rel in new.items() if rel["relkind"] == "v") == sorted(
        view.name for view in views.discover(migrations.SQL_DIR)
    )
    differences = {
        name: (new.get(name), old.get(name)) for name in set(new) | set(old) if new.get(name) != old.get(name)
    }
    assert differences == {}


def test_every_relation_and_column_carries_a_comment(fresh: Engine) -> None:
    bare = [
        f"{name}.{column.split(' ', 1)[0]}" if column else name
        for name, rel in snapshot(fresh).items()
        for column in ([""] if not rel["comment"] else []) + [c for c in rel["columns"] if c.endswith("| ")]
    ]
    assert bare == []


def test_upgrading_again_changes_nothing(upgraded: Engine) -> None:
    before, oids = snapshot(upgraded), view_oids(upgraded)

    result = migrations.upgrade_all(upgraded)

    assert (result.migrations, result.views) == ([], [])
    assert snapshot(upgraded) == before
    assert view_oids(upgraded) == oids  # replaced in place, never dropped
    assert {s.state for s in migrations.status(upgraded)} == {"applied"}


def test_an_upgrade_with_nothing_to_change_waits_for_no_query_on_a_view(upgraded: Engine) -> None:
    """A long analyst query holds its view; an upgrade that changes nothing must not queue behind it (and make
    every later reader of the view wait behind the upgrade)."""
    with upgraded.connect() as reader:
        reader.execute(text("select count(*) from memories"))  # the transaction stays open: the lock is held
        done = threading.Event()
        errors: list[BaseException] = []

        def upgrade() -> None:
            try:
                migrations.upgrade_all(upgraded)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)
            done.set()

        worker = threading.Thread(target=upgrade, daemon=True)
        worker.start()
        finished = done.wait(60)
        reader.rollback()  # lets a blocked upgrade go on
    worker.join(60)
    assert finished and errors == [], "the upgrade waited for a query on an unchanged view"


def test_a_view_changed_by_hand_is_put_back_by_the_next_upgrade(upgraded: Engine) -> None:
    with upgraded.begin() as conn:
        conn.execute(text("comment on column memories.key is 'edited by hand'"))
        conn.execute(text("alter view current_insights set (security_barrier = true)"))
    changed = migrations.upgrade_all(upgraded).views

    assert changed == ["current_insights", "memories"]
    state = snapshot(upgraded)
    assert "key text | snake_case attribute name" in " ".join(state["memories"]["columns"])
    assert state["current_insights"]["options"] == ["security_invoker=true"]


@pytest.mark.parametrize("view", [view.name for view in views.discover(migrations.SQL_DIR)])
def test_each_view_file_applied_twice_leaves_its_view_as_it_was(fresh: Engine, view: str) -> None:
    file = next(v for v in views.discover(migrations.SQL_DIR) if v.name == view)
    with fresh.connect() as conn:
        before = views.states(conn, [view])
        views.run_script(conn, file.sql)
        views.run_script(conn, file.sql)
        after = views.states(conn, [view])
        conn.rollback()
    assert before and after == before


def test_views_are_applied_after_the_views_they_read(fresh: Engine) -> None:
    """The order the files are applied in covers every view-on-view dependency the database records."""
    order = [view.name for view in views.discover(migrations.SQL_DIR)]
    with fresh.connect() as conn:
        reads = conn.execute(
            text(
                """
                select distinct reader.relname as reader, source.relname as source
                from pg_depend as d
                join pg_rewrite as r on r.oid = d.objid
                join pg_class as reader on reader.oid = r.ev_class
                join pg_class as source on source.oid = d.refobjid
                where d.classid = 'pg_rewrite'::regclass and source.relkind = 'v' and reader.oid <> source.oid
                  and reader.relnamespace = 'public'::regnamespace
                """
            )
        ).all()
    assert all(order.index(row.source) < order.index(row.reader) for row in reads)


# -- re-creating a view: what create or replace refuses, and a migration a view would block ----------------

COUNTS_VIEW = """-- grain: one row per namespace with current memory
create or replace view memory_counts with (security_invoker = true) as
select m.namespace, count(*) as count_items
from memories as m
group by m.namespace;

comment on view memory_counts is 'Current items per namespace.';
comment on column memory_counts.namespace is 'Namespace.';
comment on column memory_counts.count_items is 'Current items.';
"""


@pytest.fixture
def editable(scratch: Scratch, tmp_path: Path) -> tuple[str, Engine, Path]:
    """A database migrated from a copy of sql/ (plus memory_counts, a view that reads memories) to edit."""
    sql_dir = copy_sql(tmp_path / "sql")
    (views.views_dir(sql_dir) / "memory_counts.sql").write_text(COUNTS_VIEW)
    name, engine = scratch.database()
    migrations.upgrade(engine, sql_dir)
    return name, engine, sql_dir


def seeded_roles(scratch: Scratch, database: str, engine: Engine) -> tuple[dict[str, Engine], str]:
    """An item in two namespaces, and an agent and an analyst login granted the first."""
    mine, other = f"mine_{uuid.uuid4().hex[:6]}", f"other_{uuid.uuid4().hex[:6]}"
    with engine.begin() as conn:
        for namespace in (mine, other):
            conn.execute(INSERT_ITEM, {"ns": namespace})
    logins = {kind: scratch.role(engine, database, kind, mine) for kind in ("agent", "analyst")}
    return logins, mine


def access(logins: dict[str, Engine], view_names: list[str]) -> dict[tuple[str, str], str]:
    """What each role sees of each view: the namespaces of its rows, or 'denied' (an agent role reads only
    the views over the tables agents may read: sql/090's agent_reads)."""
    seen = {}
    for kind, login in logins.items():
        with login.connect() as conn:
            for view in view_names:
                try:
                    with conn.begin_nested():
                        rows = conn.execute(text(f'select distinct namespace from "{view}"')).scalars().all()
                    seen[kind, view] = ",".join(sorted(str(r) for r in rows))
                except ProgrammingError:
                    seen[kind, view] = "denied"
    return seen


def assert_access_kept(
    before: dict[tuple[str, str], str], after: dict[tuple[str, str], str], mine: str
) -> None:
    assert after == before
    assert {seen for (kind, _), seen in after.items() if kind == "analyst"} <= {mine, ""}
    assert {seen for seen in after.values()} <= {mine, "", "denied"}
    assert after["agent", "memories"] == after["analyst", "memory_counts"] == mine


def edit(path: Path, change: Callable[[str], str]) -> None:
    body = path.read_text(encoding="utf-8")
    changed = change(body)
    assert changed != body
    path.write_text(changed, encoding="utf-8")


def test_a_view_whose_columns_change_is_recreated_with_its_readers_grants_and_access(
    scratch: Scratch, editable: tuple[str, Engine, Path]
) -> None:
    database, engine, sql_dir = editable
    logins, mine = seeded_roles(scratch, database, engine)
    bi = scratch.role(engine, database, "analyst", mine)  # and a grant made by hand, on one view
    bi_name = bi.url.username
    with engine.begin() as conn:
        conn.execute(text(f'grant select on memory_counts to "{bi_name}" with grant option'))
    oids = view_oids(engine)
    names = [v.name for v in views.discover(sql_dir)]
    before = access(logins, names)
    # Drop the view's last column (model): create or replace refuses that, so memories is dropped and created,
    # and memory_counts, which reads it, with it.
    edit(
        views.views_dir(sql_dir) / "memories.sql",
        lambda body: body.replace(
            "        ai.prompt_version,\n        ai.model\n", "        ai.prompt_version\n"
        ).replace(
            "comment on column memories.model is 'Model that extracted the current version (null for manual "
            "edits).';\n",
            "",
        ),
    )
    assert ("views/memories.sql", "pending") in [
        (s.name, s.state) for s in migrations.status(engine, sql_dir)
    ]

    result = migrations.upgrade_all(engine, sql_dir)

    after = view_oids(engine)
    assert result.migrations == [] and {"memories", "memory_counts"} <= set(result.views)
    assert after["memories"] != oids["memories"] and after["memory_counts"] != oids["memory_counts"]
    assert {name for name in oids if after[name] != oids[name]} == {"memories", "memory_counts"}
    state = snapshot(engine)
    assert not any(column.startswith("model ") for column in state["memories"]["columns"])
    for name in ("memories", "memory_counts"):
        assert "security_invoker=true" in state[name]["options"]
        assert any(entry.startswith("strataflow_analyst=r/") for entry in state[name]["acl"])
    assert any(entry.startswith(f"{bi_name}=r*/") for entry in state["memory_counts"]["acl"])
    assert_access_kept(before, access(logins, names), mine)
    with bi.connect() as conn:
        assert conn.execute(text("select count(*) from memory_counts")).scalar() == 1
    assert migrations.upgrade_all(engine, sql_dir).views == []  # and now it is stable


def test_a_migration_that_retypes_a_column_a_view_reads_runs_and_the_views_come_back(
    scratch: Scratch, editable: tuple[str, Engine, Path]
) -> None:
    database, engine, sql_dir = editable
    logins, mine = seeded_roles(scratch, database, engine)
    names = [v.name for v in views.discover(sql_dir)]
    before, oids = access(logins, names), view_oids(engine)
    (sql_dir / "990_widen_item_importance.sql").write_text(
        "alter table memory_items alter column importance type bigint;\n"
    )

    result = migrations.upgrade_all(engine, sql_dir)

    assert result.migrations == ["990_widen_item_importance.sql"]
    assert not set(view_oids(engine).items()) & set(oids.items())  # every view dropped and created again
    state = snapshot(engine)
    assert "importance bigint | Importance 0-100" in " ".join(state["memories"]["columns"])
    assert_access_kept(before, access(logins, names), mine)
    assert migrations.upgrade_all(engine, sql_dir).views == []


def test_a_view_outside_sql_views_that_reads_one_stops_the_drop_with_its_name(
    editable: tuple[str, Engine, Path],
) -> None:
    _, engine, sql_dir = editable
    with engine.begin() as conn:
        conn.execute(text("create schema dbt_elsewhere"))
        conn.execute(text("create view dbt_elsewhere.stg_memories as select * from public.memories"))
    (sql_dir / "990_widen_item_importance.sql").write_text(
        "alter table memory_items alter column importance type bigint;\n"
    )

    with pytest.raises(migrations.MigrationError, match=r"dbt_elsewhere\.stg_memories"):
        migrations.upgrade(engine, sql_dir)

    assert view_oids(engine).keys() >= {"memories", "memory_counts"}  # rolled back: nothing dropped
    with engine.begin() as conn:
        conn.execute(text("drop schema dbt_elsewhere cascade"))
    assert migrations.upgrade(engine, sql_dir) == ["990_widen_item_importance.sql"]


# -- what a view file must be --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("create view things with (security_invoker = true) as select 1 as namespace;", "create or replace"),
        ("create or replace view things as select 1 as namespace;", "create or replace view things with"),
        (
            "create or replace view things with (security_barrier = true) as select 1 as namespace;",
            "security_inv",
        ),
        (
            "create or replace view other with (security_invoker = true) as select 1 as namespace;",
            "exactly one",
        ),
        (
            "create or replace view things with (security_invoker = true) as select 1 as namespace;\n"
            "create or replace view more with (security_invoker = true) as select 1 as namespace;",
            "exactly one",
        ),
    ],
)
def test_a_bad_view_file_is_refused_before_anything_runs(tmp_path: Path, body: str, message: str) -> None:
    (tmp_path / "views").mkdir()
    (tmp_path / "views" / "things.sql").write_text(body)
    with pytest.raises(views.ViewError, match=message):
        views.discover(tmp_path)


def test_view_files_are_ordered_by_what_they_read_and_a_cycle_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "views"
    directory.mkdir()
    view = "-- reads zz_base in a comment only\n"
    view += "create or replace view {name} with (security_invoker = true) as {q};\n"
    (directory / "aa_top.sql").write_text(view.format(name="aa_top", q="select * from mid_level"))
    (directory / "mid_level.sql").write_text(view.format(name="mid_level", q="select b.* from zz_base as b"))
    (directory / "zz_base.sql").write_text(view.format(name="zz_base", q="select 'from aa_top' as namespace"))

    assert [v.name for v in views.discover(tmp_path)] == ["zz_base", "mid_level", "aa_top"]

    (directory / "zz_base.sql").write_text(view.format(name="zz_base", q="select * from aa_top"))
    with pytest.raises(views.ViewError, match="cycle: aa_top, mid_level, zz_base"):
        views.discover(tmp_path)
