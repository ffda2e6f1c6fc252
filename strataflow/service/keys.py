"""API keys bound to database roles (sql/121_create_api_keys.sql).

A key looks like ``sf_1a2b3c4d_<43 random characters>``: the first part (``sf_1a2b3c4d``) is a visible
prefix that finds the key's row; the whole key is never stored, only its SHA-256 (32 random bytes behind it,
so a fast hash is enough). A key is bound to one login role of the agent or analyst group; every request with
it runs its transaction as that role (strataflow.db.roles.as_role), so the role's namespace grants and the
row-level security policies decide what it sees. A role granted several namespaces picks one per request.

A key may also be bound to one agent (``create-key --agent ID``, sql/280): every request with it acts as that
agent (its own private entries, shared ones and the namespace's), and a request that names another agent is
refused (AgentForbidden, 403). A key bound to no agent acts as the agent a request names, or as no agent,
which sees no agent's private entries.
"""

from __future__ import annotations

import hmac
import re
import secrets
from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy import Connection, text
from sqlalchemy.exc import IntegrityError

from models.messages import SAFE_ID
from strataflow.db.roles import AccessError
from strataflow.hashes import content_hash
from strataflow.service.schemas import ID_MAX

KEY_FORMAT = re.compile(r"^(sf_[0-9a-f]{8})_[A-Za-z0-9_-]{20,100}$")
KEY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
KINDS = {"strataflow_agent": "agent", "strataflow_analyst": "analyst"}
AGENT_ID = re.compile(SAFE_ID)  # a bound agent id follows the rule of the agent ids requests name

ROLE_GROUP = """
    (select min(g.rolname) from pg_roles as r
     join pg_auth_members as m on m.member = r.oid
     join pg_roles as g on g.oid = m.roleid and g.rolname in ('strataflow_agent', 'strataflow_analyst')
     where {match} and r.rolcanlogin)
"""
SELECT_ROLE_GROUP = text("select " + ROLE_GROUP.format(match="r.rolname = :role"))
INSERT_KEY = text(
    """
    insert into api_keys (name, prefix, key_hash, role_name, role_oid, expires_at, agent_id)
    select :name, :prefix, :key_hash, r.rolname, r.oid, now() + make_interval(days => :days), :agent_id
    from pg_roles as r where r.rolname = :role
    returning key_id, created_at, expires_at
    """
)
SELECT_KEYS = text(  # role-dropped: the key's role was dropped (or recreated: another OID); it is refused
    f"""
    select k.name, k.prefix, k.role_name, k.agent_id, k.created_at, k.expires_at, k.revoked_at,
        k.last_used_at,
        case when k.revoked_at is not null then 'revoked'
             when k.expires_at <= now() then 'expired'
             when {ROLE_GROUP.format(match="r.oid = k.role_oid and r.rolname = k.role_name")} is null
                 then 'role-dropped'
             else 'active' end as status
    from api_keys as k
    order by k.created_at, k.key_id
    """
)
REVOKE_KEY = text(
    """
    update api_keys set revoked_at = now()
    where (name = :name or prefix = :name) and revoked_at is null
    """
)
SELECT_KEY = text(
    f"""
    select k.key_id, k.name, k.role_name, k.agent_id, k.key_hash, k.revoked_at,
        k.expires_at is not null and k.expires_at <= now() as expired,
        {ROLE_GROUP.format(match="r.oid = k.role_oid and r.rolname = k.role_name")} as group_name,
        array(select ns from strataflow_visible_namespaces(cast(k.role_name as name)) as ns order by ns)
            as namespaces
    from api_keys as k
    where k.prefix = :prefix
    """
)
TOUCH_KEY = text("update api_keys set last_used_at = now() where key_id = :key_id")


class KeyRejected(Exception):
    """The request's key cannot be used (missing, unknown, revoked, expired); the message says which."""


class NamespaceRequired(Exception):
    """The key's role has several namespaces and the request picked none."""


class NamespaceForbidden(AccessError):
    """The key's role may not use the namespace the request picked (or has none)."""


class AgentForbidden(AccessError):
    """A key bound to an agent named another one in its request."""


class ReadOnly(AccessError):
    """A key whose role may only read (an analyst's) asked to write."""


@dataclass(frozen=True)
class KeyInfo:
    name: str
    prefix: str
    role_name: str
    status: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None
    agent_id: str | None = None


@dataclass(frozen=True)
class Caller:
    """Who a request comes from: the key, its role and kind, the agent it is bound to (or None), and the
    namespace the request uses."""

    key_id: int
    key_name: str
    role: str
    kind: str  # agent or analyst
    namespaces: tuple[str, ...]
    namespace: str = ""
    agent: str | None = None

    @property
    def writer(self) -> bool:
        """Whether the key's role may write (an agent role; an analyst's only reads)."""
        return self.kind == "agent"

    def require_writer(self) -> None:
        """ReadOnly (403) for a key whose role may only read: every write of every surface checks this."""
        if not self.writer:
            raise ReadOnly(f"key {self.key_name!r} has the {self.kind} role {self.role!r}: read-only")

    def acting(self, requested: str | None) -> Acting:
        """Who a request that names `requested` (or no agent) acts as (agent_for)."""
        return Acting(self, self.agent_for(requested))

    def agent_for(self, requested: str | None) -> str | None:
        """The agent a request acts as: the key's own agent (a request naming another one is refused with
        AgentForbidden), else the agent the request names, else None (no agent's private entries)."""
        if self.agent is None:
            return requested
        if requested is not None and requested != self.agent:
            raise AgentForbidden(
                f"key {self.key_name!r} is bound to agent {self.agent!r}; "
                f"it cannot act as agent {requested!r}"
            )
        return self.agent

    def in_namespace(self, wanted: str | None) -> Caller:
        """The caller bound to one namespace: the role's only one, or `wanted` (X-Namespace) among several."""
        if not self.namespaces:
            raise NamespaceForbidden(
                f"the role {self.role!r} of key {self.key_name!r} is granted no namespace: "
                f"`strataflow access grant {self.role} --namespace NS`"
            )
        if wanted:
            if wanted not in self.namespaces:
                raise NamespaceForbidden(f"key {self.key_name!r} may not use namespace {wanted!r}")
            return replace(self, namespace=wanted)
        if len(self.namespaces) > 1:
            raise NamespaceRequired(
                f"key {self.key_name!r} may use namespaces {', '.join(self.namespaces)}: "
                "send X-Namespace to pick one"
            )
        return replace(self, namespace=self.namespaces[0])


@dataclass(frozen=True)
class Acting:
    """Who one request or tool call acts as, decided once (strataflow.service.deps.acting, the MCP server's
    call): the caller (its key, role, rights and namespace) and the agent it acts as, the key's own or the
    one the request named (Caller.agent_for)."""

    caller: Caller
    agent: str | None

    @property
    def namespace(self) -> str:
        return self.caller.namespace

    def require_writer(self) -> None:
        self.caller.require_writer()


def hash_key(key: str) -> str:
    """What api_keys stores of a key: its sha256 (strataflow.hashes.content_hash), never the key."""
    return content_hash(key)


def create_key(
    conn: Connection, name: str, role: str, expires_days: int | None = None, agent_id: str | None = None
) -> tuple[str, KeyInfo]:
    """A new key for role (a login role of the agent or analyst group), bound to agent_id when given;
    returns (key, info). The key is shown only here."""
    if not KEY_NAME.match(name):
        raise AccessError(f"key name {name!r}: use 1-100 letters, digits, '_', '.' or '-'")
    if agent_id is not None and not (len(agent_id) <= ID_MAX and AGENT_ID.match(agent_id)):
        raise AccessError(
            f"--agent {agent_id!r}: use 1-{ID_MAX} characters, no '/', no control character and no "
            "line separator"
        )
    if expires_days is not None and not 1 <= expires_days <= 3650:
        raise AccessError(f"--expires must be 1-3650 days, got {expires_days}")
    if conn.execute(SELECT_ROLE_GROUP, {"role": role}).scalar() is None:
        raise AccessError(
            f"no agent or analyst login role {role!r}: create it with "
            f"`strataflow access create-role {role} --kind agent` (or --kind analyst)"
        )
    for _ in range(3):  # a clash of two random 32-bit prefixes is rare; draw again
        prefix = f"sf_{secrets.token_hex(4)}"
        key = f"{prefix}_{secrets.token_urlsafe(32)}"
        params = {
            "name": name,
            "prefix": prefix,
            "key_hash": hash_key(key),
            "role": role,
            "days": expires_days,
            "agent_id": agent_id,
        }
        try:
            with conn.begin_nested():
                row = conn.execute(INSERT_KEY, params).one()
        except IntegrityError as exc:
            if "api_keys_active_name_idx" in str(exc.orig):
                raise AccessError(
                    f"a key named {name!r} exists; revoke it first or pick another name"
                ) from None
            continue
        info = KeyInfo(name, prefix, role, "active", row.created_at, row.expires_at, None, None, agent_id)
        return key, info
    raise AccessError("could not draw a unique key prefix; try again")


def list_keys(conn: Connection) -> list[KeyInfo]:
    return [
        KeyInfo(
            r.name,
            r.prefix,
            r.role_name,
            r.status,
            r.created_at,
            r.expires_at,
            r.revoked_at,
            r.last_used_at,
            r.agent_id,
        )
        for r in conn.execute(SELECT_KEYS)
    ]


def revoke_key(conn: Connection, name: str) -> bool:
    """Revoke the active key with this name or prefix; effective for the next request. False: none."""
    return conn.execute(REVOKE_KEY, {"name": name}).rowcount > 0


def authenticate(conn: Connection, key: str | None) -> Caller:
    """The caller of a key (not yet bound to a namespace); KeyRejected when the key cannot be used."""
    if not key:
        raise KeyRejected("no API key: send Authorization: Bearer <key> (strataflow access create-key)")
    found = KEY_FORMAT.match(key.strip())
    row = conn.execute(SELECT_KEY, {"prefix": found.group(1)}).first() if found else None
    if row is None or not hmac.compare_digest(row.key_hash, hash_key(key.strip())):
        raise KeyRejected("the API key is not valid")
    if row.revoked_at is not None:
        raise KeyRejected(f"the API key {row.name!r} was revoked")
    if row.expired:
        raise KeyRejected(f"the API key {row.name!r} has expired")
    if row.group_name is None:
        raise KeyRejected(f"the role {row.role_name!r} of key {row.name!r} no longer exists or cannot log in")
    return Caller(
        row.key_id, row.name, row.role_name, KINDS[row.group_name], tuple(row.namespaces), agent=row.agent_id
    )


def touch(conn: Connection, caller: Caller) -> None:
    """Record that the key was used (callers do this at most once a minute per key)."""
    conn.execute(TOUCH_KEY, {"key_id": caller.key_id})
