"""`strataflow access ...`: login roles for agents and analysts, and which namespaces they may see."""

from __future__ import annotations

import typer

from strataflow.commands.common import cli_errors, settings_or_exit

access_app = typer.Typer(help="Roles and namespace grants (row-level security).", no_args_is_help=True)


def _engine():  # type: ignore[no-untyped-def]
    from strataflow.db.engine import engine_for

    return engine_for(settings_or_exit())


@access_app.command("create-role")
def create_role(
    name: str = typer.Argument(..., help="Login role to create (lower snake_case)."),
    kind: str = typer.Option(
        ..., "--kind", help="agent (read memory, write L2 items) or analyst (read-only)."
    ),
) -> None:
    """Create a LOGIN role in the agent or analyst group. It sees nothing until granted a namespace.

    With the embedded server it logs in over the local socket; with an external server a generated password
    is printed once (store it in PGPASSWORD or ~/.pgpass).

    Example: strataflow access create-role bi --kind analyst
    """
    from strataflow.db import roles
    from strataflow.db.engine import engine_for

    settings = settings_or_exit()
    with cli_errors(), engine_for(settings).begin() as conn:
        password = roles.create_role(conn, name, kind, with_password=settings.database_url is not None)
    typer.echo(f"created {kind} role {name}", err=True)
    if password:
        typer.echo(f"password (shown once): {password}")


@access_app.command("grant")
def grant(
    name: str = typer.Argument(..., help="Login role."),
    namespace: str = typer.Option(..., "--namespace", help="Namespace the role may see."),
) -> None:
    """Let a role see a namespace (agents may also write its L2 items).

    Example: strataflow access grant bi --namespace alpha
    """
    from strataflow.db import roles

    with cli_errors(), _engine().begin() as conn:
        added = roles.grant(conn, name, namespace)
    typer.echo(f"{'granted' if added else 'already granted'}: {name} -> {namespace}", err=True)


@access_app.command("revoke")
def revoke(
    name: str = typer.Argument(..., help="Login role."),
    namespace: str = typer.Option(..., "--namespace", help="Namespace to take away."),
) -> None:
    """Take a namespace away from a role; effective from its next transaction.

    Example: strataflow access revoke bi --namespace alpha
    """
    from strataflow.db import roles

    with cli_errors(), _engine().begin() as conn:
        removed = roles.revoke(conn, name, namespace)
    typer.echo(f"{'revoked' if removed else 'was not granted'}: {name} -> {namespace}", err=True)


@access_app.command("list")
def list_roles() -> None:
    """List strataflow login roles, their kind and granted namespaces.

    Example: strataflow access list
    """
    from strataflow.db import roles

    with cli_errors(), _engine().connect() as conn:
        listed = roles.list_roles(conn)
    for role in listed:
        typer.echo(f"{role.role_name}\t{role.kind}\t{','.join(role.namespaces) or '-'}")


def register(app: typer.Typer) -> None:
    from strataflow.commands.keys import register_key_commands

    register_key_commands(access_app)  # create-key, list-keys, revoke-key: the service's API keys
    app.add_typer(access_app, name="access")
