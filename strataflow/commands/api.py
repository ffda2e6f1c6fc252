"""`strataflow api` (the HTTP service) and `strataflow mcp` (the MCP server over stdio)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from strataflow.commands.common import cli_errors, settings_or_exit
from strataflow.errors import UserError


def api(
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind; 0.0.0.0 only behind a TLS proxy."),
    port: int = typer.Option(8700, "--port", min=1, max=65535, help="TCP port."),
    workers: int = typer.Option(
        1, "--workers", min=1, max=64, help="Server processes (one pool and model each)."
    ),
) -> None:
    """Serve the agent memory API over HTTP (FastAPI, uvicorn): /v1 endpoints, /mcp, /docs, /healthz, /readyz.

    Requests carry a key from `strataflow access create-key` as `Authorization: Bearer KEY`; each runs as the
    key's database role. SIGTERM (or Ctrl-C) stops taking requests and lets the running ones finish.

    Example: strataflow api --port 8700 --workers 2
    """
    from strataflow.db.engine import check_connection
    from strataflow.service.server import serve

    settings = settings_or_exit()
    with cli_errors():
        check_connection(settings)  # start the embedded server (or fail clearly) before the workers do
    serve(host, port, workers)


def mcp() -> None:
    """Serve the memory tools to an MCP client over stdio, with the key in STRATAFLOW_API_KEY.

    Tools: memory_save, memory_recall, memory_update, memory_delete, get_context, save_user_memory,
    get_user_context, profile_get, profile_patch. STRATAFLOW_API_NAMESPACE picks the namespace when the key's
    role has several. The same tools are served over HTTP at /mcp by `strataflow api`.

    Example: STRATAFLOW_API_KEY=sf_... strataflow mcp
    """
    from strataflow.db.engine import engine_for
    from strataflow.service.mcp_server import build_server
    from strataflow.service.session import Sessions

    inherit_client_environment()
    settings = settings_or_exit()
    with cli_errors():
        if settings.api_key is None:
            raise UserError("set STRATAFLOW_API_KEY to a key from `strataflow access create-key`")
        server = build_server(settings, Sessions(settings, engine_for(settings)))
    server.run("stdio")


def inherit_client_environment() -> None:
    """MCP clients start a stdio server with a reduced environment (the official Python SDK passes only HOME,
    LOGNAME, PATH, SHELL, TERM and USER unless the client configures `env`). When this process has no
    STRATAFLOW_* or DATABASE_URL variable at all, take those (and only those) from the client process that
    started it, so `STRATAFLOW_API_KEY=... some-mcp-client` works as it reads. Linux (/proc) only; an `env`
    block in the client's configuration always wins."""
    if any(name.startswith("STRATAFLOW_") or name == "DATABASE_URL" for name in os.environ):
        return
    try:
        raw = Path(f"/proc/{os.getppid()}/environ").read_bytes()
    except OSError:
        return
    for entry in raw.split(b"\0"):
        name, _, value = entry.decode("utf-8", errors="replace").partition("=")
        if name.startswith("STRATAFLOW_") or name == "DATABASE_URL":
            os.environ[name] = value
    print("strataflow mcp: settings taken from the MCP client's environment", file=sys.stderr)


def register(app: typer.Typer) -> None:
    app.command("api")(api)
    app.command("mcp")(mcp)
