"""`strataflow api` (the HTTP service) and `strataflow mcp` (the MCP server over stdio)."""

from __future__ import annotations

import typer

from strataflow.commands.common import cli_errors, settings_or_exit
from strataflow.errors import UserError


def api(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind; 0.0.0.0 only behind a TLS proxy."),
    port: int = typer.Option(8700, "--port", min=1, max=65535, help="TCP port."),
    workers: int = typer.Option(
        0,
        "--workers",
        min=0,
        max=64,
        help="Server processes (one pool and model each); 0: one per usable core.",
    ),
) -> None:
    """Serve the agent memory API over HTTP (FastAPI, uvicorn): /v1 endpoints, /mcp, /docs, /healthz, /readyz.

    Requests carry a key from `strataflow access create-key` as `Authorization: Bearer KEY`; each runs as the
    key's database role. SIGTERM (or Ctrl-C) stops taking requests and lets the running ones finish.

    Each worker's Python runs on about one core (the GIL), so by default there is one worker per core this
    process may use, each with its share of the cores for torch's and BLAS's threads (OMP_NUM_THREADS and
    MKL_NUM_THREADS, unless set): strataflow.service.sizing.

    Example: strataflow api --port 8700 --workers 2
    """
    import os

    from strataflow.db.engine import check_connection
    from strataflow.service.server import serve
    from strataflow.service.sizing import usable_cores, worker_environment, workers_for

    settings = settings_or_exit()
    with cli_errors():
        check_connection(settings)  # start the embedded server (or fail clearly) before the workers do
    cores = usable_cores()
    workers = workers_for(workers, cores)
    os.environ.update(worker_environment(workers, cores, os.environ))  # the workers inherit it
    serve(host, port, workers)


def mcp() -> None:
    """Serve the memory tools to an MCP client over stdio, with the key in STRATAFLOW_API_KEY.

    The server reads only its own settings: its environment (the `env` block of the client's configuration)
    and the settings file $STRATAFLOW_HOME/.env (or STRATAFLOW_ENV_FILE), never the client's environment nor a
    .env in the working directory. It checks its key at start and exits with a message saying what is wrong
    (missing, invalid, revoked or expired). Tools: memory_save, memory_recall, memory_update, memory_delete,
    get_context, save_user_memory, get_user_context, profile_get, profile_patch (an analyst key gets the
    read tools only). STRATAFLOW_API_NAMESPACE picks the namespace when the key's role has several. The same
    tools are served over HTTP at /mcp by `strataflow api`.

    Example: STRATAFLOW_API_KEY=sf_... STRATAFLOW_HOME=~/.strataflow strataflow mcp
    """
    import threading

    from strataflow import telemetry
    from strataflow.db.engine import engine_for
    from strataflow.service.keys import KeyRejected
    from strataflow.service.mcp_server import build_server
    from strataflow.service.session import Sessions

    settings = settings_or_exit()
    if settings.api_key is None:
        typer.echo(
            "error: strataflow mcp needs an API key: set STRATAFLOW_API_KEY (and STRATAFLOW_HOME, or "
            "DATABASE_URL) in the `env` block of the MCP client's configuration, or in "
            "$STRATAFLOW_HOME/.env; make a key with `strataflow access create-key NAME --role ROLE`",
            err=True,
        )
        raise typer.Exit(2)
    with cli_errors():
        sessions = Sessions(settings, engine_for(settings))
        try:
            caller = sessions.authenticate(settings.api_key.get_secret_value())
        except KeyRejected as exc:
            raise UserError(
                f"strataflow mcp: {exc} (STRATAFLOW_API_KEY, database under {settings.home})"
            ) from None
        server = build_server(settings, sessions, writable=caller.writer)
    typer.echo(f"strataflow mcp: key {caller.key_name!r} ({caller.kind} role {caller.role})", err=True)
    threading.Thread(target=sessions.warm_up, name="warm-up", daemon=True).start()  # while the client waits
    telemetry.configure_from(settings, "strataflow-mcp")  # spans of the tools' memory operations, if asked
    server.run("stdio")


def register(app: typer.Typer) -> None:
    app.command("api")(api)
    app.command("mcp")(mcp)
