"""Namespace access for agents, analysts and BI tools: login roles in the strataflow groups, grants, URLs.

The database enforces it (sql/090_create_roles_and_policies.sql): row-level security on every table with a
namespace column, read through security_invoker views. This module manages roles and grants, and `as_role`
switches a transaction to a role (for code that serves several namespaces from one connection pool).

A grant belongs to the role, not to its name (sql/103: namespace_grants keeps the role's OID), so a role
dropped and created again starts with no namespace. Every role gets a generated password, set as a SCRAM
verifier (strataflow.db.passwords); the CLI keeps it in STRATAFLOW_HOME for `strataflow db url --role`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, urlsplit, urlunsplit

from sqlalchemy import Connection, text

from strataflow.db import passwords

ROLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
GROUPS = {"agent": "strataflow_agent", "analyst": "strataflow_analyst", "pipeline": "strataflow_pipeline"}

SELECT_ROLES = text(
    """
    select r.rolname as role_name, g.rolname as group_name,
           coalesce(array_agg(ng.namespace order by ng.namespace) filter (where ng.namespace is not null),
                    '{}') as namespaces
    from pg_roles as r
    join pg_auth_members as m on m.member = r.oid
    join pg_roles as g on g.oid = m.roleid and g.rolname in ('strataflow_agent', 'strataflow_analyst',
                                                            'strataflow_pipeline')
    left join namespace_grants as ng on ng.role_oid = r.oid
    where r.rolcanlogin
    group by r.rolname, g.rolname
    order by r.rolname
    """
)


# A role as_role may switch to: a plain login role in the agent or analyst group, and nothing more (not the
# groups, not the pipeline, not a superuser or a role that bypasses row-level security or creates roles).
SELECT_SWITCHABLE = text(
    """
    select r.rolcanlogin and not r.rolsuper and not r.rolbypassrls and not r.rolcreaterole
           and exists (select 1 from pg_auth_members as m join pg_roles as g on g.oid = m.roleid
                       where m.member = r.oid and g.rolname in ('strataflow_agent', 'strataflow_analyst'))
           and not pg_has_role(r.oid, 'strataflow_pipeline', 'member') as switchable
    from pg_roles as r
    where r.rolname = :n
    """
)
INSERT_GRANT = text(
    """
    insert into namespace_grants (role_oid, role_name, namespace)
    select r.oid, r.rolname, :ns from pg_roles as r where r.rolname = :r
    on conflict do nothing
    """
)
DELETE_GRANT = text(
    """
    delete from namespace_grants as g
    using pg_roles as r
    where r.rolname = :r and g.role_oid = r.oid and g.namespace = :ns
    """
)
# Grants of a dropped namesake (another OID): they would not count (sql/103), and create-role clears them.
DELETE_STALE_GRANTS = text(
    """
    delete from namespace_grants as g
    where g.role_name = :r
      and not exists (select 1 from pg_roles as r where r.oid = g.role_oid and r.rolname = g.role_name)
    """
)


class AccessError(ValueError):
    """A role or grant request that cannot be done; the message says why."""


@dataclass(frozen=True)
class RoleInfo:
    role_name: str
    kind: str
    namespaces: list[str]


def check_role_name(name: str) -> str:
    if not ROLE_NAME.match(name):
        raise AccessError(f"role name {name!r} must be lower snake_case (a-z, 0-9, _), at most 63 characters")
    if name.startswith("strataflow_") or name in ("postgres", "public"):
        raise AccessError(f"role name {name!r} is reserved")
    return name


def _role_exists(conn: Connection, name: str) -> bool:
    return bool(conn.execute(text("select 1 from pg_roles where rolname = :n"), {"n": name}).first())


# Sessions one agent or analyst login may hold at once (sql/440 gives existing ones the same): a BI tool or a
# script that leaks connections, or a role whose password leaked, cannot take the server's connections from
# the pipeline, the API (which logs in as the owner) and the other roles.
ROLE_CONNECTIONS = 20


def create_role(conn: Connection, name: str, kind: str, with_password: bool = True) -> str | None:
    """Create a LOGIN role in the group of kind, with no namespace; return its generated password (set as a
    SCRAM verifier; the caller keeps it). with_password=False: a role only `as_role` switches to (it cannot
    log in where passwords are required)."""
    check_role_name(name)
    if kind not in ("agent", "analyst"):
        raise AccessError(f"--kind must be agent or analyst, not {kind!r}")
    if _role_exists(conn, name):
        raise AccessError(f"role {name!r} already exists; revoke or drop it first, or pick another name")
    # Identifiers cannot be bound parameters; the name was validated against ROLE_NAME above.
    conn.execute(
        text(f'create role "{name}" login inherit connection limit {ROLE_CONNECTIONS} in role {GROUPS[kind]}')
    )
    conn.execute(DELETE_STALE_GRANTS, {"r": name})
    if not with_password:
        return None
    password = passwords.generate_password()
    set_password(conn, name, password)
    return password


def set_password(conn: Connection, name: str, password: str) -> None:
    """Give a strataflow login role a new password (as a SCRAM verifier, never in clear text)."""
    _require_login_role(conn, name)
    passwords.set_password(conn.connection.dbapi_connection, name, password)  # type: ignore[arg-type]


def _require_login_role(conn: Connection, name: str) -> None:
    check_role_name(name)
    if not _role_exists(conn, name):
        raise AccessError(
            f"no role {name!r}: create it with `strataflow access create-role {name} --kind agent`"
        )


def grant(conn: Connection, name: str, namespace: str) -> bool:
    """Let role see (and, for agents, write memory of) namespace. False when it already could."""
    _require_login_role(conn, name)
    return conn.execute(INSERT_GRANT, {"r": name, "ns": namespace}).rowcount == 1


def revoke(conn: Connection, name: str, namespace: str) -> bool:
    """Take namespace away from role; effective from the role's next transaction."""
    _require_login_role(conn, name)
    return conn.execute(DELETE_GRANT, {"r": name, "ns": namespace}).rowcount == 1


def list_roles(conn: Connection) -> list[RoleInfo]:
    kinds = {group: kind for kind, group in GROUPS.items()}
    return [
        RoleInfo(row.role_name, kinds[row.group_name], list(row.namespaces))
        for row in conn.execute(SELECT_ROLES)
    ]


def as_role(conn: Connection, role_name: str) -> None:
    """Run the rest of conn's current transaction as role_name (`set local role`), so the namespace policies
    bind it: one process serving several agents switches per transaction and the role ends with it (commit or
    rollback). Only a login role of the agent or analyst group is accepted (never a group, the pipeline or a
    superuser). The connection's login role must be a superuser or a member of role_name."""
    check_role_name(role_name)
    switchable = conn.execute(SELECT_SWITCHABLE, {"n": role_name}).scalar()
    if switchable is None:
        raise AccessError(
            f"no role {role_name!r}: create it with `strataflow access create-role {role_name} --kind agent`"
        )
    if not switchable:
        raise AccessError(
            f"role {role_name!r} is not an agent or analyst login role (made by `strataflow access "
            "create-role`); as_role switches only to those"
        )
    # Identifiers cannot be bound parameters; the name was validated against ROLE_NAME above.
    conn.execute(text(f'set local role "{role_name}"'))


def role_url(base_url: str, role: str, password: str | None = None) -> str:
    """The libpq URL that connects as role, with its password when given (the embedded server and any server
    with password authentication need it; strataflow.db.passwords.role_password reads the stored one)."""
    check_role_name(role)
    parts = urlsplit(base_url)
    host = parts.netloc.rsplit("@", 1)[-1]
    login = quote(role) + (f":{quote(password, safe='')}" if password else "")
    return urlunsplit((parts.scheme, f"{login}@{host}", parts.path, parts.query, parts.fragment))


SET_AGENT = text("select set_config('strataflow.agent', :agent, true)")


def as_agent(conn: Connection, agent_id: str | None) -> None:
    """Bind the rest of conn's current transaction to one agent (`strataflow.agent`, local to the
    transaction), for a request of an agent-bound key: row-level security (sql/320) then shows that agent's
    own L2 items, shared ones and the namespace's, and accepts writes of L2 items and L1 messages for that
    agent only. None (a key bound to no agent) sets nothing: the namespace policies alone apply."""
    if agent_id is not None:
        conn.execute(SET_AGENT, {"agent": agent_id})
