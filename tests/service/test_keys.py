"""API keys bound to roles (strataflow.service.keys) and the `strataflow access` key commands."""

from __future__ import annotations

import pytest
from sqlalchemy import Connection, Engine, text
from typer.testing import CliRunner

from strataflow.db.roles import AccessError
from strataflow.service import keys
from tests.fixtures.service import Tenant, make_tenant


def test_a_key_is_stored_as_a_hash_and_authenticates_as_its_role_and_namespaces(
    engine: Engine, tenants: dict[str, Tenant]
) -> None:
    both = tenants["both"]
    with engine.connect() as conn:
        caller = keys.authenticate(conn, both.key)
        stored = conn.execute(
            text("select prefix, key_hash from api_keys where role_name = :r"), {"r": both.role}
        )
        prefix, key_hash = stored.one()
    assert (caller.role, caller.kind, caller.namespaces) == (
        both.role,
        "agent",
        tuple(sorted(both.namespaces)),
    )
    assert (
        both.key.startswith(prefix + "_") and key_hash == keys.hash_key(both.key) and both.key not in key_hash
    )
    # a role with several namespaces picks one per request
    with pytest.raises(keys.NamespaceRequired, match="X-Namespace"):
        caller.in_namespace(None)
    assert caller.in_namespace(both.namespaces[1]).namespace == both.namespaces[1]
    with pytest.raises(keys.NamespaceForbidden):
        caller.in_namespace("not_granted")


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        (None, "no API key"),  # no Authorization header
        ("sf_deadbeef_" + "x" * 43, "not valid"),  # the shape of a key, but unknown
        ("Bearer nonsense", "not valid"),  # not a key at all
    ],
)
def test_a_missing_or_unknown_key_is_rejected(conn: Connection, key: str | None, reason: str) -> None:
    with pytest.raises(keys.KeyRejected, match=reason):
        keys.authenticate(conn, key)


def test_a_revoked_or_expired_key_is_rejected_and_a_tampered_one_too(engine: Engine) -> None:
    tenant = make_tenant(engine, "agent", ("ns_keys",), expires_days=30)
    with engine.begin() as conn:
        assert keys.authenticate(conn, tenant.key).role == tenant.role
        with pytest.raises(keys.KeyRejected, match="not valid"):
            keys.authenticate(conn, tenant.key[:-1] + ("A" if tenant.key[-1] != "A" else "B"))
        conn.execute(
            text("update api_keys set expires_at = now() - interval '1 s' where name = :n"),
            {"n": tenant.role},
        )
        with pytest.raises(keys.KeyRejected, match="expired"):
            keys.authenticate(conn, tenant.key)
        assert keys.revoke_key(conn, tenant.role) is True
        assert keys.revoke_key(conn, tenant.role) is False  # already revoked
        with pytest.raises(keys.KeyRejected, match="revoked"):
            keys.authenticate(conn, tenant.key)
        statuses = {key.name: key.status for key in keys.list_keys(conn)}
    assert statuses[tenant.role] == "revoked"


def test_a_key_needs_an_agent_or_analyst_login_role_and_a_free_name(conn: Connection) -> None:
    with pytest.raises(AccessError, match="no agent or analyst login role 'strataflow_pipeline'"):
        keys.create_key(conn, "pipeline-key", "strataflow_pipeline")
    with pytest.raises(AccessError, match="no agent or analyst login role 'nobody_here'"):
        keys.create_key(conn, "ghost", "nobody_here")
    with pytest.raises(AccessError, match="key name"):
        keys.create_key(conn, "bad name!", "nobody_here")


def test_create_key_prints_the_key_alone_on_the_last_line_and_list_keys_never_shows_it(
    engine: Engine, tenants: dict[str, Tenant]
) -> None:
    from strataflow.cli import app

    runner = CliRunner()
    created = runner.invoke(app, ["access", "create-key", "cli-key", "--role", tenants["alpha"].role])
    assert created.exit_code == 0, created.output
    key = created.stdout.strip().splitlines()[-1]
    with engine.connect() as conn:
        assert keys.authenticate(conn, key).role == tenants["alpha"].role
    listed = runner.invoke(app, ["access", "list-keys"])
    line = next(row for row in listed.stdout.splitlines() if row.startswith("cli-key\t"))
    assert (
        line.split("\t")[1:5] == [key[:11], tenants["alpha"].role, "-", "active"] and key not in listed.stdout
    )
    duplicate = runner.invoke(app, ["access", "create-key", "cli-key", "--role", tenants["alpha"].role])
    assert duplicate.exit_code == 1 and "exists" in duplicate.stderr
    revoked = runner.invoke(app, ["access", "revoke-key", "cli-key"])
    assert revoked.exit_code == 0
    with engine.connect() as conn, pytest.raises(keys.KeyRejected, match="revoked"):
        keys.authenticate(conn, key)
