"""`strataflow db ...`: migrations, the connection URL, and the embedded server's life."""

from __future__ import annotations

from pathlib import Path

import typer

from strataflow.commands.common import cli_errors, settings_or_exit
from strataflow.errors import UserError

db_app = typer.Typer(help="Database: migrations, connection URL, embedded server.", no_args_is_help=True)


@db_app.command("upgrade")
def upgrade() -> None:
    """Apply pending migrations from sql/ in order (each in its own transaction), then sql/views/.

    Running it again changes nothing. An applied numbered file that was edited is refused; a view file is
    meant to be edited, and the next upgrade re-creates the view from it (grants kept).

    Example: strataflow db upgrade
    """
    from strataflow.db import migrations
    from strataflow.db.engine import check_connection, engine_for

    settings = settings_or_exit()
    with cli_errors():
        check_connection(settings)
        result = migrations.upgrade_all(engine_for(settings))
    from strataflow.ops.run_metrics import write_textfile

    write_textfile(settings)  # every flow's run counters from 0, before its first run (ops/run_metrics.py)
    applied = result.migrations
    typer.echo(
        f"applied {len(applied)} migration(s)" + (": " + ", ".join(applied) if applied else ": up to date")
    )
    typer.echo(
        f"views: {len(result.views)} changed"
        + (": " + ", ".join(result.views) if result.views else ", up to date")
    )


@db_app.command("status")
def status() -> None:
    """List applied and pending migrations, then the view files (pending: changed since the last upgrade).

    Example: strataflow db status
    """
    from strataflow.db import migrations
    from strataflow.db.engine import check_connection, engine_for

    settings = settings_or_exit()
    with cli_errors():
        check_connection(settings)
        rows = migrations.status(engine_for(settings))
    for row in rows:
        typer.echo(f"{row.state:8} {row.name}" + (f"  ({row.applied_at})" if row.applied_at else ""))
    pending = sum(row.state == "pending" for row in rows)
    typer.echo(f"{len(rows) - pending} applied, {pending} pending")
    if any(row.state == "edited" for row in rows):
        raise typer.Exit(1)


@db_app.command("url")
def url(
    role: str = typer.Option(None, "--role", help="Print a URL that connects as this strataflow role."),
) -> None:
    """Print the libpq connection URL (for psql or a BI tool) as the only line on stdout.

    The URL holds a password (the owner's, or with --role that role's, from STRATAFLOW_HOME/secrets): treat it
    as a secret.

    Example: psql "$(strataflow db url)"
    """
    from strataflow.db.engine import libpq_url, role_libpq_url

    settings = settings_or_exit()
    with cli_errors():
        uri = role_libpq_url(settings, role) if role else libpq_url(settings)
    typer.echo(uri)


@db_app.command("rotate-password")
def rotate_password() -> None:
    """Give the embedded server's owner a new generated password (kept in STRATAFLOW_HOME/secrets).

    Open connections stay open; later commands read the new password. Roles: `strataflow access
    rotate-password NAME`.

    Example: strataflow db rotate-password
    """
    from strataflow.db import embedded

    settings = settings_or_exit()
    with cli_errors():
        if settings.database_url is not None:
            raise UserError("DATABASE_URL is set: change that server's password there, then DATABASE_URL")
        embedded.rotate_owner_password(settings.home)
    typer.echo("the owner has a new password", err=True)


@db_app.command("stop")
def stop() -> None:
    """Stop the embedded PostgreSQL server of this STRATAFLOW_HOME (it otherwise keeps running).

    Example: strataflow db stop
    """
    from strataflow.db import embedded

    settings = settings_or_exit()
    with cli_errors():
        if settings.database_url is not None:
            raise UserError("DATABASE_URL is set: strataflow does not manage that server")
        stopped = embedded.stop(settings.home)
    typer.echo("stopped the embedded server" if stopped else "the embedded server was not running", err=True)


@db_app.command("backup")
def backup(path: Path = typer.Argument(..., help="File to write (pg_dump custom format).")) -> None:
    """Dump the database with the bundled pg_dump; restore with pg_restore.

    Example: strataflow db backup ./strataflow.dump
    """
    from strataflow.db import embedded
    from strataflow.db.engine import libpq_url

    settings = settings_or_exit()
    with cli_errors():
        embedded.backup(libpq_url(settings), path)
    typer.echo(f"wrote {path}", err=True)


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")
