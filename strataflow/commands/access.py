"""`strataflow access ...`: login roles for agents and analysts, and which namespaces they may see."""

from __future__ import annotations

import typer

from strataflow.commands.common import cli_errors, settings_or_exit

access_app = typer.Typer(help="Roles and namespace grants (row-level security).", no_args_is_help=True)


def _engine():
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

    The role gets a generated password (set as a SCRAM verifier), kept in STRATAFLOW_HOME/secrets (mode
    0600): `strataflow db url --role NAME` prints a URL with it. With an external server (DATABASE_URL) the
    password is also printed once, for the client that will use it.

    Example: strataflow access create-role bi --kind analyst
    """
    from strataflow.db import passwords, roles
    from strataflow.db.engine import engine_for

    settings = settings_or_exit()
    with cli_errors(), engine_for(settings).begin() as conn:
        password = roles.create_role(conn, name, kind)
        assert password is not None
        passwords.store_role_password(settings.home, name, password)
    typer.echo(
        f"created {kind} role {name}; its password is in {passwords.role_password_path(settings.home, name)}",
        err=True,
    )
    if settings.database_url is not None:
        typer.echo(f"password: {password}")


@access_app.command("rotate-password")
def rotate_password(name: str = typer.Argument(..., help="Login role made by create-role.")) -> None:
    """Give a role a new generated password (the old one stops working for new connections).

    Open connections stay open; clients reconnect with `strataflow db url --role NAME`.

    Example: strataflow access rotate-password bi
    """
    from strataflow.db import passwords, roles
    from strataflow.db.engine import engine_for

    settings = settings_or_exit()
    password = passwords.generate_password()
    with cli_errors(), engine_for(settings).begin() as conn:
        roles.set_password(conn, name, password)
        passwords.store_role_password(settings.home, name, password)
    typer.echo(f"new password for {name} in {passwords.role_password_path(settings.home, name)}", err=True)
    if settings.database_url is not None:
        typer.echo(f"password: {password}")


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
