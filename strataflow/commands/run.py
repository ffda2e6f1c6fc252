"""`strataflow run ...`, `serve`, `status` and `demo`: the flows from the command line, a local Prefect
server with the deployments, the pipeline's state, and the one-command tour."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from strataflow.commands.common import UserError, cli_errors, settings_or_exit, stderr

run_app = typer.Typer(
    help="Run a flow now, in this process (ephemeral Prefect API unless PREFECT_API_URL is set)."
)

PATH_HELP = "Log file or directory (repeatable). Default: the inbox, STRATAFLOW_HOME/inbox."
LOG_PATHS = typer.Option(None, "--path", help=PATH_HELP)
ASSET_PATHS = typer.Option(
    None, "--path", help="Asset file or directory (repeatable). Default: STRATAFLOW_HOME/assets."
)
DEMO_OUT = typer.Option(None, "--out", help="Sample directory. Default: STRATAFLOW_HOME/demo.")


def _run(name: str, values: dict[str, Any]) -> None:
    from strataflow.config import Settings
    from strataflow.ops import flow_runner

    settings: Settings = settings_or_exit()
    with cli_errors():
        flow_params = _params_model(name)
        params = flow_runner.build_params(flow_params, values)
        flow_runner.prefect_environment(settings)
        flow = flow_runner.with_runner(flow_runner.load_flow(name), settings)
        stderr(f"running the {name} flow (Prefect starts a temporary API when PREFECT_API_URL is unset) ...")
        state = flow(params, return_state=True)
        if not state.is_completed():
            raise UserError(
                f"the {name} run ended {state.name}: {state.message or 'see the Prefect log above'}"
            )
        _print_summary(state.result())


def _params_model(name: str) -> Any:
    from models import params

    return {
        "nightly": params.NightlyParams,
        "weekly": params.WeeklyParams,
        "assets": params.AssetsParams,
        "backfill": params.BackfillParams,
    }[name]


def _print_summary(summary: Any) -> None:
    counts = summary.counts.model_dump()
    typer.echo(f"{summary.flow} run {summary.run_id}: {summary.status}")
    if summary.days or summary.weeks:
        typer.echo(f"  {'days, weeks':24} {summary.days}, {summary.weeks}")
    for key, value in counts.items():
        typer.echo(f"  {key:24} {value}")


def _paths(paths: list[Path] | None) -> list[str] | None:
    return [str(path) for path in paths] if paths else None


@run_app.command("nightly")
def run_nightly(
    run_date: str = typer.Option(
        None, "--date", help="The night this run stands for (YYYY-MM-DD). Default: today."
    ),
    paths: list[Path] = LOG_PATHS,
    namespace: str = typer.Option(None, "--namespace", help="Namespace for records that name none."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Expiry only reports what it would remove."),
) -> None:
    """Ingest new logs, embed, extract L2, refresh hot memory and expire old L1, as the 02:00 schedule does.

    A rerun for the same logs makes no LLM call and encodes nothing.

    Example: strataflow run nightly --path ./exports --namespace acme
    """
    _run(
        "nightly", {"run_date": run_date, "paths": _paths(paths), "namespace": namespace, "dry_run": dry_run}
    )


@run_app.command("weekly")
def run_weekly(
    week_start: str = typer.Option(None, "--week-start", help="Monday of one week. Default: every week due."),
    namespace: str = typer.Option(None, "--namespace", help="Only this namespace."),
) -> None:
    """Roll up complete ISO weeks into weekly reports, reflect insights and embed the reports.

    Example: strataflow run weekly
    """
    _run("weekly", {"week_start": week_start, "namespace": namespace})


@run_app.command("assets")
def run_assets(
    paths: list[Path] = ASSET_PATHS,
    namespace: str = typer.Option(None, "--namespace", help="Namespace of the assets (default: default)."),
) -> None:
    """Ingest data assets (docs, CSV/Parquet/JSON tables) into long-term memory and embed their chunks.

    Example: strataflow run assets --path ./docs --namespace acme
    """
    _run("assets", {"paths": _paths(paths), "namespace": namespace})


@run_app.command("backfill")
def run_backfill(
    start: str = typer.Option(..., "--start", help="First day (YYYY-MM-DD)."),
    end: str = typer.Option(..., "--end", help="Last day, inclusive (YYYY-MM-DD)."),
    stages: str = typer.Option(
        None, "--stages", help="Comma-separated: ingest,embed,extract,hot_memory,rollup,reflect,expire."
    ),
    paths: list[Path] = LOG_PATHS,
    namespace: str = typer.Option(None, "--namespace", help="Namespace for records that name none."),
) -> None:
    """Run the nightly stages day by day and the weekly rollup week by week over a past date range.

    Files whose name holds a date are ingested on that day. Idempotent: rerunning a range is cheap.

    Example: strataflow run backfill --start 2024-03-01 --end 2024-03-31 --path ./exports
    """
    stage_list = [part.strip() for part in stages.split(",") if part.strip()] if stages else None
    values = {
        "start": start,
        "end": end,
        "stages": stage_list,
        "paths": _paths(paths),
        "namespace": namespace,
    }
    _run("backfill", values)


@run_app.callback()
def run_group() -> None:
    """Run a flow now (nightly, weekly, assets, backfill)."""


def serve(
    port: int = typer.Option(4200, "--port", help="Port of the Prefect server (127.0.0.1)."),
    pool: str = typer.Option("strataflow-pool", "--pool", help="Process work pool of prefect.yaml."),
) -> None:
    """Start a local Prefect server, register the deployments of prefect.yaml and a worker; Ctrl-C stops both.

    Open the printed URL to see the four deployments and start a backfill from its form.

    Example: strataflow serve
    """
    from strataflow.ops import serve as serving

    settings = settings_or_exit()
    with cli_errors():
        serving.serve(settings, port=port, pool=pool)


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
) -> None:
    """The tour: embedded database, bilingual sample, a backfill through Prefect, then what each layer holds.

    A second run reuses the sample and everything computed (no LLM call).

    Example: strataflow demo
    """
    from strataflow.demo import tour

    settings = settings_or_exit()
    with cli_errors():
        typer.echo(tour.run_demo(settings, out))


def register(app: typer.Typer) -> None:
    """Add `run`, `serve`, `status` and `demo` to the strataflow app."""
    app.add_typer(run_app, name="run")
    app.command("serve")(serve)
    app.command("status")(status)
    app.command("demo")(demo)
