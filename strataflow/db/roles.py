"""Namespace access for agents, analysts and BI tools: login roles in the strataflow groups, grants, URLs.

The database enforces it (sql/090_create_roles_and_policies.sql): row-level security on every table with a
namespace column, read through security_invoker views. This module manages roles and grants, and `as_role`
switches a transaction to a role (for code that serves several namespaces from one connection pool).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from urllib.parse import quote, urlsplit, urlunsplit

from sqlalchemy import Connection, text

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
    left join namespace_grants as ng on ng.role_name = r.rolname
    where r.rolcanlogin
    group by r.rolname, g.rolname
    order by r.rolname
    """
)


class AccessError(ValueError):
    """A role or grant request that cannot be done; the message says why."""


@dataclass(frozen=True)
class RoleInfo:
    role_name: str
    kind: str
    namespaces: list[str]


def _check_name(name: str) -> str:
    if not ROLE_NAME.match(name):
        raise AccessError(f"role name {name!r} must be lower snake_case (a-z, 0-9, _), at most 63 characters")
    if name.startswith("strataflow_") or name in ("postgres", "public"):
        raise AccessError(f"role name {name!r} is reserved")
    return name


def _role_exists(conn: Connection, name: str) -> bool:
    return bool(conn.execute(text("select 1 from pg_roles where rolname = :n"), {"n": name}).first())


def create_role(conn: Connection, name: str, kind: str, with_password: bool) -> str | None:
    """Create a LOGIN role in the group of kind; return its generated password when with_password."""
    _check_name(name)
    if kind not in ("agent", "analyst"):
        raise AccessError(f"--kind must be agent or analyst, not {kind!r}")
    if _role_exists(conn, name):
        raise AccessError(f"role {name!r} already exists; revoke or drop it first, or pick another name")
    password = secrets.token_urlsafe(24) if with_password else None
    # Identifiers cannot be bound parameters; the name was validated against ROLE_NAME above.
    conn.execute(text(f'create role "{name}" login inherit in role {GROUPS[kind]}'))
    if password is not None:
        conn.execute(text(f"alter role \"{name}\" password '{password}'"))
    return password


def _require_login_role(conn: Connection, name: str) -> None:
    _check_name(name)
    if not _role_exists(conn, name):
        raise AccessError(
            f"no role {name!r}: create it with `strataflow access create-role {name} --kind agent`"
        )


def grant(conn: Connection, name: str, namespace: str) -> bool:
    """Let role see (and, for agents, write memory of) namespace. False when it already could."""
    _require_login_role(conn, name)
    result = conn.execute(
        text("insert into namespace_grants (role_name, namespace) values (:r, :ns) on conflict do nothing"),
        {"r": name, "ns": namespace},
    )
    return result.rowcount == 1


def revoke(conn: Connection, name: str, namespace: str) -> bool:
    """Take namespace away from role; effective from the role's next transaction."""
    _require_login_role(conn, name)
    result = conn.execute(
        text("delete from namespace_grants where role_name = :r and namespace = :ns"),
        {"r": name, "ns": namespace},
    )
    return result.rowcount == 1


def list_roles(conn: Connection) -> list[RoleInfo]:
    kinds = {group: kind for kind, group in GROUPS.items()}
    return [
        RoleInfo(row.role_name, kinds[row.group_name], list(row.namespaces))
        for row in conn.execute(SELECT_ROLES)
    ]


def as_role(conn: Connection, role_name: str) -> None:
    """Run the rest of conn's current transaction as role_name (`set local role`), so the namespace policies
    bind it: one process serving several agents switches per transaction and the role ends with it (commit or
    rollback). The connection's login role must be a superuser or a member of role_name."""
    if role_name not in GROUPS.values():
        _check_name(role_name)
    if not _role_exists(conn, role_name):
        raise AccessError(
            f"no role {role_name!r}: create it with `strataflow access create-role {role_name} --kind agent`"
        )
    # Identifiers cannot be bound parameters; the name was validated against ROLE_NAME above.
    conn.execute(text(f'set local role "{role_name}"'))


def role_url(base_url: str, role: str) -> str:
    """The libpq URL that connects as role: the embedded server trusts local sockets, so no password; an
    external server needs the password printed at create-role (put it in PGPASSWORD or ~/.pgpass)."""
    _check_name(role)
    parts = urlsplit(base_url)
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, f"{quote(role)}@{host}", parts.path, parts.query, parts.fragment))
