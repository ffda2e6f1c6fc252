"""Analyst views as re-creatable files: sql/views/NAME.sql, one view each, applied after the numbered files.

A file holds `create or replace view NAME with (security_invoker = true) as ...` and the view's `comment on`
statements, so the current definition of a view is that one file. `strataflow db upgrade` goes through every
file on every run, in dependency order (a view after the views it reads), in one transaction, and applies the
ones that are not as their file made them: a new or edited file, a missing view, a view changed by hand since
(schema_views keeps each file's checksum and a hash of the definition, options and comments it made), or every
file after a numbered migration ran. An upgrade with nothing to change so takes no lock on a view.

- `create or replace view` keeps the view's OID, owner, privileges and comments, and whatever reads it (other
  views, dbt models in another schema); re-applying an unchanged file changes nothing.
- PostgreSQL refuses `create or replace` when the column list changes other than by adding columns at the
  end (SQLSTATE 42P16). Then the view, and the views of sql/views/ that read it, are dropped and created
  again from their files, and their owner and privileges are put back as they were. A view outside
  sql/views/ that reads one of them stops the upgrade with its name (drop it, re-create it afterwards).
- A numbered migration that changes a column a view reads (a type change, a dropped column) fails while the
  view exists; the migrator then drops the views of sql/views/ (privileges kept, as above), applies the
  migration again, and the view stage re-creates them from their files.

Reloptions come from the file (create or replace resets them): every file must say `security_invoker = true`,
so row-level security of the caller applies through the view.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import psycopg
from sqlalchemy import Connection, text
from sqlalchemy.exc import DBAPIError

from strataflow.hashes import content_hash

VIEWS_SUBDIR = "views"
VIEW_FILE = re.compile(r"^[a-z][a-z0-9_]*\.sql$")
CREATE_ANY_VIEW = re.compile(
    r"^\s*create\s+(?:or\s+replace\s+)?(?:materialized\s+)?view\s+(\w+)", re.I | re.M
)
CREATE_VIEW = re.compile(r"^create\s+or\s+replace\s+view\s+(\w+)\s+with\s*\(([^)]*)\)\s+as\b", re.I | re.M)
SECURITY_INVOKER = re.compile(r"\bsecurity_invoker\s*=\s*(true|on|1)\b", re.I)
READS = re.compile(r"\b(?:from|join)\s+(?:public\.)?(\w+)", re.I)
LITERAL_OR_COMMENT = re.compile(r"'(?:[^']|'')*'|--[^\n]*|/\*.*?\*/", re.S)

CHANGED_COLUMNS = "42P16"  # invalid_table_definition: create or replace view cannot drop, rename or retype
BLOCKED_BY_VIEW = ("2BP01", "0A000")  # dependent objects still exist; cannot alter a column used by a view

CREATE_VIEWS_TABLE = text(
    """
    create table if not exists schema_views (
        name text primary key,
        checksum text not null,
        state_hash text,
        applied_at timestamptz not null default now()
    )
    """
)
SELECT_RECORDED = text("select name, checksum, state_hash, applied_at from schema_views order by name")
RECORD_VIEW = text(
    """
    insert into schema_views (name, checksum, state_hash) values (:name, :checksum, :state_hash)
    on conflict (name) do update
    set checksum = excluded.checksum,
        state_hash = excluded.state_hash,
        applied_at = case when schema_views.checksum <> excluded.checksum then now()
                          else schema_views.applied_at end
    where (schema_views.checksum, schema_views.state_hash)
        is distinct from (excluded.checksum, excluded.state_hash)
    """
)

# What an analyst sees of a view: definition, options, privileges and comments (a change here is a change).
SELECT_VIEW_STATE = text(
    """
    select c.relname,
           jsonb_build_object(
               'definition', pg_get_viewdef(c.oid),
               'options', coalesce(c.reloptions, '{}'),
               'owner', pg_get_userbyid(c.relowner),
               'acl', coalesce(c.relacl::text[], '{}'),
               'comment', obj_description(c.oid, 'pg_class'),
               'columns', (
                   select jsonb_agg(jsonb_build_array(a.attname, format_type(a.atttypid, a.atttypmod),
                                                      col_description(c.oid, a.attnum), a.attacl::text[])
                                    order by a.attnum)
                   from pg_attribute as a
                   where a.attrelid = c.oid and a.attnum > 0 and not a.attisdropped
               )
           ) as state
    from pg_class as c
    where c.relnamespace = 'public'::regnamespace and c.relkind = 'v' and c.relname = any(:names)
    """
)

# Every relation (any schema) whose rewrite rule reads one of the given relations, directly or through others.
SELECT_READERS = text(
    """
    with recursive readers as (
        select distinct r.ev_class as oid
        from pg_depend as d
        join pg_rewrite as r on r.oid = d.objid
        where d.classid = 'pg_rewrite'::regclass and d.refclassid = 'pg_class'::regclass
          and d.refobjid = any(cast(:oids as oid[])) and r.ev_class <> d.refobjid
        union
        select r.ev_class
        from readers as rd
        join pg_depend as d on d.refobjid = rd.oid
        join pg_rewrite as r on r.oid = d.objid
        where d.classid = 'pg_rewrite'::regclass and d.refclassid = 'pg_class'::regclass
          and r.ev_class <> d.refobjid
    )
    select c.oid::bigint as oid, n.nspname as schema_name, c.relname
    from readers as rd
    join pg_class as c on c.oid = rd.oid
    join pg_namespace as n on n.oid = c.relnamespace
    order by n.nspname, c.relname
    """
)
SELECT_VIEW_OIDS = text(
    """
    select c.relname, c.oid::bigint as oid
    from pg_class as c
    where c.relnamespace = 'public'::regnamespace and c.relkind = 'v' and c.relname = any(:names)
    """
)

# Statements that give a view its owner and privileges back after a drop and create (table and column grants).
SELECT_ACCESS_STATEMENTS = text(
    """
    with targets as (
        select c.oid, c.relname, c.relowner, c.relacl
        from pg_class as c
        where c.oid = any(cast(:oids as oid[]))
    ),

    grants as (
        select t.relname, null::name as column_name, acl.grantee, acl.privilege_type, acl.is_grantable
        from targets as t
        cross join lateral aclexplode(t.relacl) as acl
        union all
        select t.relname, col.attname, acl.grantee, acl.privilege_type, acl.is_grantable
        from targets as t
        join pg_attribute as col on col.attrelid = t.oid and col.attnum > 0 and not col.attisdropped
        cross join lateral aclexplode(col.attacl) as acl
    )

    select t.relname, 0 as step,
           format('alter view %I owner to %I', t.relname, pg_get_userbyid(t.relowner)) as statement
    from targets as t
    union all
    select g.relname, 1,
           format('grant %s%s on %I to %s%s', g.privilege_type,
                  case when g.column_name is null then '' else format(' (%I)', g.column_name) end, g.relname,
                  case when g.grantee = 0 then 'public' else quote_ident(pg_get_userbyid(g.grantee)) end,
                  case when g.is_grantable then ' with grant option' else '' end)
    from grants as g
    order by 1, 2, 3
    """
)


class ViewError(RuntimeError):
    """A view file cannot be read or applied; the message says which file and why."""


@dataclass(frozen=True)
class View:
    name: str
    checksum: str
    sql: str
    reads: tuple[str, ...]  # other views of sql/views/ this one selects from


@dataclass(frozen=True)
class ViewStatus:
    name: str
    state: str  # applied, pending (new or changed since the last upgrade)
    applied_at: str | None


def views_dir(sql_dir: Path) -> Path:
    return sql_dir / VIEWS_SUBDIR


def discover(sql_dir: Path) -> list[View]:
    """Every view file of sql_dir/views, checked, in dependency order (each after the views it reads)."""
    directory = views_dir(sql_dir)
    files = sorted(directory.glob("*.sql")) if directory.is_dir() else []
    found: dict[str, tuple[str, str]] = {}
    for path in files:
        if not VIEW_FILE.match(path.name):
            raise ViewError(f"sql/views/{path.name}: a view file is named NAME.sql in lower snake_case")
        body = path.read_text(encoding="utf-8")
        found[path.stem] = (body, _check(path.stem, body))
    views = {
        name: View(
            name,
            content_hash(body),
            body,
            tuple(sorted({r.lower() for r in READS.findall(code)} & (set(found) - {name}))),
        )
        for name, (body, code) in found.items()
    }
    return _in_dependency_order(views)


def _check(name: str, body: str) -> str:
    """The file's SQL without comments and string literals, after checking it creates exactly its view."""
    code = LITERAL_OR_COMMENT.sub(lambda m: "''" if m[0].startswith("'") else " ", body)
    created = [match.lower() for match in CREATE_ANY_VIEW.findall(code)]
    if created != [name]:
        raise ViewError(
            f"sql/views/{name}.sql must create exactly one view, {name} "
            f"(found: {', '.join(created) or 'none'})"
        )
    header = CREATE_VIEW.search(code)
    if not header or header[1].lower() != name:
        raise ViewError(
            f"sql/views/{name}.sql must start its view with `create or replace view {name} with "
            "(security_invoker = true) as` (a file is applied again on every upgrade)"
        )
    if not SECURITY_INVOKER.search(header[2]):
        raise ViewError(
            f"sql/views/{name}.sql: the view must be `with (security_invoker = true)`, so the reader's "
            "row-level security applies through it (create or replace resets options the file leaves out)"
        )
    return code


def _in_dependency_order(views: dict[str, View]) -> list[View]:
    ordered: list[View] = []
    placed: set[str] = set()
    while len(ordered) < len(views):
        ready = sorted(n for n, v in views.items() if n not in placed and set(v.reads) <= placed)
        if not ready:
            cycle = sorted(n for n in views if n not in placed)
            raise ViewError(f"sql/views/: these views read each other in a cycle: {', '.join(cycle)}")
        ordered += [views[n] for n in ready]
        placed.update(ready)
    return ordered


def run_script(conn: Connection, sql: str) -> None:
    """Run a SQL file as written: the raw psycopg cursor with no parameters (no %-placeholder parsing)."""
    with conn.connection.dbapi_connection.cursor() as cursor:  # type: ignore[union-attr]
        cursor.execute(sql)


def sqlstate(exc: BaseException) -> str | None:
    original = getattr(exc, "orig", None) or exc
    return getattr(original, "sqlstate", None)


def error_text(exc: BaseException) -> str:
    return str(getattr(exc, "orig", None) or exc).strip()


def states(conn: Connection, names: list[str]) -> dict[str, object]:
    """What each existing view looks like to a reader (definition, options, owner, privileges, comments)."""
    return {row.relname: row.state for row in conn.execute(SELECT_VIEW_STATE, {"names": names})}


def drop(conn: Connection, names: list[str], managed: list[str]) -> dict[str, list[str]]:
    """Drop the existing views among names together with every view of `managed` that reads them; return, per
    dropped view, the statements that give it back its owner and privileges once it is created again. A reader
    outside `managed` (another schema's view, a dbt model) stops it: strataflow does not drop what it did not
    create."""
    oids = {row.relname: row.oid for row in conn.execute(SELECT_VIEW_OIDS, {"names": names})}
    if not oids:
        return {}
    managed_oids = {row.relname: row.oid for row in conn.execute(SELECT_VIEW_OIDS, {"names": managed})}
    readers = conn.execute(SELECT_READERS, {"oids": list(oids.values())}).all()
    foreign = [
        f"{r.schema_name}.{r.relname}"
        for r in readers
        if r.schema_name != "public" or r.relname not in managed_oids
    ]
    if foreign:
        raise ViewError(
            f"view(s) {', '.join(sorted(oids))} must be dropped and created again, but "
            f"{', '.join(foreign)} read(s) them and were not made from sql/views/: drop those, run "
            "`strataflow db upgrade`, then create them again (dbt models: `strataflow analytics build`)"
        )
    dropped = sorted(set(oids) | {r.relname for r in readers})
    dropped_oids = [managed_oids.get(name) or oids[name] for name in dropped]
    restore: dict[str, list[str]] = {name: [] for name in dropped}
    for row in conn.execute(SELECT_ACCESS_STATEMENTS, {"oids": dropped_oids}):
        restore[row.relname].append(row.statement)
    try:
        with conn.begin_nested():
            conn.execute(text("drop view " + ", ".join(f'"{name}"' for name in dropped)))
    except DBAPIError as exc:  # something other than a view reads them (a function body, a rule)
        raise ViewError(
            f"cannot drop view(s) {', '.join(dropped)} to create them again: {error_text(exc)}"
        ) from None
    return restore


def apply(
    conn: Connection, views: list[View], restore: dict[str, list[str]], *, everything: bool = False
) -> tuple[list[str], list[str]]:
    """Create or replace the views from their files, in order, in the caller's transaction (the migrations
    lock held). A view whose file and definition are as recorded at the last upgrade is left alone, so an
    upgrade with nothing to change takes no lock on a view a long query reads; `everything` (a numbered
    migration ran) applies every file. `restore` holds the owner and privilege statements of views dropped
    earlier in this upgrade; it is emptied as they are re-created. Returns (views that changed, views that did
    not exist and had nothing to restore, so they need their grants from
    strataflow_apply_namespace_security())."""
    conn.execute(CREATE_VIEWS_TABLE)
    names = [view.name for view in views]
    before = states(conn, names)
    recorded = {row.name: (row.checksum, row.state_hash) for row in conn.execute(SELECT_RECORDED)}
    current = {
        view.name
        for view in views
        if not everything
        and view.name in before
        and recorded.get(view.name) == (view.checksum, _defined_hash(before[view.name]))
    }
    new = [name for name in names if name not in before and name not in restore]
    done: set[str] = set()
    budget = len(views) ** 2 + 1  # a file conflicts at most once; a conflict re-queues the views reading it
    while len(done) < len(views):
        if budget == 0:
            left = ", ".join(sorted(set(names) - done))
            raise ViewError(f"sql/views/: views kept dropping each other: {left}")
        budget -= 1
        view = next(view for view in views if view.name not in done)
        if view.name not in current:
            dropped = _apply_one(conn, view, names, restore)
            done -= set(dropped)
            current -= set(dropped)  # gone now: created again from their files
            for statement in restore.pop(view.name, []):
                conn.execute(text(statement))
        done.add(view.name)
    after = states(conn, names)
    for view in views:
        state_hash = _defined_hash(after[view.name])
        conn.execute(RECORD_VIEW, {"name": view.name, "checksum": view.checksum, "state_hash": state_hash})
    changed = [name for name in names if before.get(name) != after.get(name)]
    return changed, new


def _defined_hash(state: object) -> str:
    """Hash of what a view file defines: definition, options, comments, columns (not owner or privileges)."""
    assert isinstance(state, dict)
    defined = {key: state[key] for key in ("definition", "options", "comment")}
    defined["columns"] = [column[:3] for column in state["columns"]]
    return content_hash(json.dumps(defined, sort_keys=True))


def _apply_one(conn: Connection, view: View, names: list[str], restore: dict[str, list[str]]) -> list[str]:
    """Apply one view file; on a changed column list, drop it (and the views that read it) and create it
    again. Returns the names of the other views dropped on the way (created again from their files)."""
    try:
        with conn.begin_nested():
            run_script(conn, view.sql)
        return []
    except (DBAPIError, psycopg.Error) as exc:
        if sqlstate(exc) != CHANGED_COLUMNS:
            raise ViewError(f"sql/views/{view.name}.sql failed: {error_text(exc)}") from None
    saved = drop(conn, [view.name], names)
    for name, statements in saved.items():
        restore.setdefault(name, statements)
    try:
        with conn.begin_nested():
            run_script(conn, view.sql)
    except (DBAPIError, psycopg.Error) as exc:
        raise ViewError(f"sql/views/{view.name}.sql failed: {error_text(exc)}") from None
    return [name for name in saved if name != view.name]


def status(conn: Connection, views: list[View]) -> list[ViewStatus]:
    conn.execute(CREATE_VIEWS_TABLE)
    recorded = {row.name: row for row in conn.execute(SELECT_RECORDED)}
    result = []
    for view in views:
        row = recorded.get(view.name)
        if row is None or row.checksum != view.checksum:
            result.append(ViewStatus(view.name, "pending", None))
        else:
            result.append(ViewStatus(view.name, "applied", row.applied_at.isoformat()))
    return result
