"""`strataflow run ...`, `serve`, `status` and `demo`: the flows from the command line, a local Prefect
server with the deployments, the pipeline's state, and the one-command tour."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import date
from inspect import Parameter
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

import typer
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from models.params import RunSummary
from strataflow.commands.common import cli_errors, settings_or_exit, stderr
from strataflow.ops.flow_runner import PARAMS

KEYWORD_ONLY = Parameter.KEYWORD_ONLY

run_app = typer.Typer(
    help="Run a flow now, in this process (ephemeral Prefect API unless PREFECT_API_URL is set)."
)

# Option names that differ from the field name in kebab case (a repeatable option reads best singular).
OPTION_NAMES = {"paths": ("--path",), "run_date": ("--run-date", "--date")}
EXAMPLES = {
    "nightly": "strataflow run nightly --path ./exports --namespace acme",
    "weekly": "strataflow run weekly",
    "incremental": "strataflow run incremental --namespace acme",
    "analytics": "strataflow run analytics",
    "assets": "strataflow run assets --path ./docs --namespace acme",
    "backfill": "strataflow run backfill --start 2024-03-01 --end 2024-03-31 --path ./exports\n\n"
    "Recompute March's extraction with a new model, cost first: strataflow run backfill --start 2024-03-01"
    " --end 2024-03-31 --stages extract --reprocess --dry-run",
}
DEMO_OUT = typer.Option(None, "--out", help="Sample directory. Default: STRATAFLOW_HOME/demo.")


def _run(name: str, values: dict[str, Any]) -> None:
    from strataflow.ops import flow_runner

    settings = settings_or_exit()
    with cli_errors():
        params = flow_runner.build_params(flow_runner.PARAMS[name], values)
        stderr(f"running the {name} flow (Prefect starts a temporary API when PREFECT_API_URL is unset) ...")
        _print_summary(flow_runner.run_flow(settings, name, params))


def _print_summary(summary: RunSummary) -> None:
    day = f" for {summary.run_date}" if summary.run_date else ""
    typer.echo(f"{summary.flow} run {summary.run_id}{day}: {summary.status}")
    if summary.plan is not None:
        typer.echo(f"  {'dry run':24} {summary.plan.range_summary()}: nothing sent or written")
    elif summary.days or summary.weeks:
        typer.echo(f"  {'days, weeks':24} {summary.days}, {summary.weeks}")
    for key, value in summary.counts.model_dump().items():
        typer.echo(f"  {key:24} {value}")
    for error in summary.errors:
        typer.echo(f"error: {error}", err=True)
    if summary.plan is not None:  # a dry run: its plan as one JSON line, last on stdout
        typer.echo(summary.plan.model_dump_json())


def _cli_value(annotation: Any, value: Any) -> Any:
    """A CLI value as the model takes it: a list option also accepts comma-separated values."""
    if value is None or get_origin(annotation) is not list:
        return value
    return [part.strip() for item in value for part in str(item).split(",") if part.strip()]


def _option(name: str, field: FieldInfo) -> tuple[Any, Any]:
    """(annotation, typer.Option) of one model field: its description is the help text."""
    annotation = field.annotation
    args = [a for a in get_args(annotation) if a is not type(None)] or [annotation]
    base = args[0] if get_origin(annotation) in (Union, UnionType) else annotation
    required = field.is_required()
    if base is bool:
        cli_type: Any = bool
        names: tuple[str, ...] = (f"--{name.replace('_', '-')}/--no-{name.replace('_', '-')}",)
    else:
        cli_type = list[str] if get_origin(base) is list else str
        names = OPTION_NAMES.get(name, (f"--{name.replace('_', '-')}",))
    default = ... if required else (field.default if base is bool else None)
    metavar = None if base is bool else "YYYY-MM-DD" if base is date else name.removesuffix("s").upper()
    help_text = (field.description or "") + (
        " Repeatable, or comma-separated." if cli_type == list[str] else ""
    )
    return cli_type, typer.Option(default, *names, help=help_text, metavar=metavar, show_default=base is bool)


def flow_command(name: str, model: type[BaseModel]) -> Callable[..., None]:
    """The `strataflow run NAME` command: one option per field of the flow's parameter model."""
    fields = model.model_fields
    parameters = []
    for field_name, field in fields.items():
        cli_type, option = _option(field_name, field)
        parameters.append(inspect.Parameter(field_name, KEYWORD_ONLY, default=option, annotation=cli_type))

    def command(**values: Any) -> None:
        _run(name, {key: _cli_value(fields[key].annotation, value) for key, value in values.items()})

    command.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    what = inspect.cleandoc(model.__doc__ or "").partition(": ")[2]  # "Parameters of the X flow: what"
    command.__doc__ = f"Run the {name} flow: {what}\n\nExample: {EXAMPLES[name]}"
    command.__name__ = f"run_{name}"
    return command


for _name, _model in PARAMS.items():
    run_app.command(_name)(flow_command(_name, _model))


@run_app.callback()
def run_group() -> None:
    """Run a flow now (nightly, weekly, incremental, assets, backfill)."""


def serve(
    port: int = typer.Option(4200, "--port", help="Port of the Prefect server and its UI."),
    host: str = typer.Option("127.0.0.1", "--host", help="Address the Prefect server listens on."),
    pool: str = typer.Option("strataflow-pool", "--pool", help="Process work pool of prefect.yaml."),
) -> None:
    """Start a local Prefect server, register the deployments of prefect.yaml and a worker; Ctrl-C stops both.

    Open the printed URL to see the deployments and start a backfill from its form. With
    STRATAFLOW_ALERT_WEBHOOK set it also registers the alert automation (strataflow notify setup).

    Example: strataflow serve --port 4300
    """
    from strataflow.ops import serve as serving

    settings = settings_or_exit()
    with cli_errors():
        serving.serve(settings, port=port, pool=pool, host=host)


def status(
    namespace: str = typer.Option(None, "--namespace", "-n", help="Only this namespace (default: all)."),
) -> None:
    """Show the last run of each flow with its state (completed, completed_with_errors, budget_stopped,
    failed) and errors, watermarks and lag per stage and scope, the quarantine rate and the L1 partitions
    due to expire.

    Example: strataflow status --namespace acme
    """
    from strataflow.db.engine import check_connection
    from strataflow.ops import status as state

    settings = settings_or_exit()
    with cli_errors():
        check_connection(settings)
        typer.echo(state.render(state.collect(settings, namespace)))


def demo(
    out: Path = DEMO_OUT,
    model: str = typer.Option(
        "offline",
        "--model",
        help="offline (the rules provider) or local (the packaged model, localmodel extra).",
    ),
) -> None:
    """The tour: embedded database, bilingual sample, a backfill through Prefect, then what each layer holds.

    A second run reuses the sample and everything computed (no LLM call).

    With --model local every stage runs on the packaged local model (Qwen2.5-Coder-0.5B-Instruct through
    llama.cpp; the localmodel extra) over a smaller sample, with a time estimate first (docs/models.md).

    Example: strataflow demo --model local
    """
    from strataflow.demo import tour

    settings = settings_or_exit()
    with cli_errors():
        if model not in ("offline", "local"):
            raise typer.BadParameter(f"{model!r}: use offline or local", param_hint="--model")
        if model == "local":
            from strataflow.demo.local import run_local_demo

            typer.echo(run_local_demo(settings, out))
            return
        typer.echo(tour.run_demo(settings, out))


def register(app: typer.Typer) -> None:
    """Add `run`, `serve`, `status` and `demo` to the strataflow app."""
    app.add_typer(run_app, name="run")
    app.command("serve")(serve)
    app.command("status")(status)
    app.command("demo")(demo)
