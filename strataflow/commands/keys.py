"""`strataflow access create-key | list-keys | revoke-key`: API keys of the service, bound to roles."""

from __future__ import annotations

import typer

from strataflow.commands.common import cli_errors, settings_or_exit


def create_key(
    name: str = typer.Argument(..., help="A name for the key (who or what uses it)."),
    role: str = typer.Option(..., "--role", help="Login role of the agent or analyst group the key acts as."),
    expires: int | None = typer.Option(
        None, "--expires", help="Days until the key stops working (default: never)."
    ),
    agent: str | None = typer.Option(
        None, "--agent", help="Bind the key to this agent: it acts only as that agent (default: no agent)."
    ),
) -> None:
    """Make an API key for the service, bound to a role: every request with it runs as that role.

    With --agent, every request acts as that agent (its private entries, shared ones and the namespace's);
    a request naming another agent gets 403. A key with no agent sees no agent's private entries. The key is
    printed once, alone on the last line of stdout; only its hash is stored.

    Example: strataflow access create-key support-bot --role support_agent --agent support-bot --expires 90
    """
    from strataflow.db.engine import engine_for
    from strataflow.service import keys

    with cli_errors(), engine_for(settings_or_exit()).begin() as conn:
        key, info = keys.create_key(conn, name, role, expires, agent)
    until = info.expires_at.isoformat() if info.expires_at else "no expiry"
    bound = f", agent {info.agent_id}" if info.agent_id else ""
    typer.echo(
        f"created key {info.name} ({info.prefix}...) for role {info.role_name}{bound}, {until}", err=True
    )
    typer.echo("store it now: it is not shown again", err=True)
    typer.echo(key)


def list_keys() -> None:
    """List API keys: name, visible prefix, role, agent, status, created, expires, last used (never the key).

    Example: strataflow access list-keys
    """
    from strataflow.db.engine import engine_for
    from strataflow.service import keys

    with cli_errors(), engine_for(settings_or_exit()).connect() as conn:
        listed = keys.list_keys(conn)
    for key in listed:
        when = [
            t.isoformat(timespec="seconds") if t else "-"
            for t in (key.created_at, key.expires_at, key.last_used_at)
        ]
        typer.echo("\t".join([key.name, key.prefix, key.role_name, key.agent_id or "-", key.status, *when]))


def revoke_key(name: str = typer.Argument(..., help="Key name or visible prefix (sf_...).")) -> None:
    """Revoke an API key; requests with it get 401 from the next one on.

    Example: strataflow access revoke-key support-bot
    """
    from strataflow.db.engine import engine_for
    from strataflow.service import keys

    with cli_errors(), engine_for(settings_or_exit()).begin() as conn:
        revoked = keys.revoke_key(conn, name)
    typer.echo(f"{'revoked' if revoked else 'no active key named'} {name}", err=True)
    if not revoked:
        raise typer.Exit(1)


def register_key_commands(access_app: typer.Typer) -> None:
    access_app.command("create-key")(create_key)
    access_app.command("list-keys")(list_keys)
    access_app.command("revoke-key")(revoke_key)
