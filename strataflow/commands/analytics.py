"""`strataflow analytics ...`: the dbt project of analytics/ (build, docs, freshness), its generated files,
and a team's own dbt project that installs it as a package (--project-dir)."""

from __future__ import annotations

from pathlib import Path

import typer

from strataflow.commands.common import cli_errors, settings_or_exit, stderr

analytics_app = typer.Typer(
    help="The dbt project in analytics/: marts in schema analytics, docs, source freshness.",
    no_args_is_help=True,
)


def _finish(run: object, what: str) -> None:
    from models.analytics import AnalyticsRun

    assert isinstance(run, AnalyticsRun)
    for node in run.results:
        typer.echo(f"  {node.status:8} {node.resource_type:6} {node.name} ({node.execution_time_s:.2f} s)")
    failed = run.failed()
    if not run.success:
        detail = "; ".join(f"{n.name}: {n.message}" for n in failed) or run.error or "see the log"
        typer.echo(f"error: {run.command} failed: {detail} (log: {run.log_path})", err=True)
        raise typer.Exit(1)
    typer.echo(f"{run.command}: {len(run.results)} node(s) ok; {what} {run.target_dir}")


SELECT = typer.Option(None, "--select", "-s", help="dbt node selection (repeatable), e.g. mart_llm_cost+.")
EXCLUDE = typer.Option(None, "--exclude", help="dbt nodes to leave out (repeatable).")
SELECTOR = typer.Option(None, "--selector", help="A selector of analytics/selectors.yml: nightly, weekly.")
FULL_REFRESH = typer.Option(False, "--full-refresh", help="Rebuild incremental models from scratch.")
VARS = typer.Option(None, "--vars", help="dbt vars as YAML/JSON, e.g. '{llm_cost_lookback_days: 7}'.")
QUIET = typer.Option(False, "--quiet", "-q", help="Do not show dbt's progress lines (only the summary).")
PROJECT_DIR = typer.Option(
    None,
    "--project-dir",
    help="A team's own dbt project (outside the checkout) that installs strataflow's as a package; "
    "default STRATAFLOW_ANALYTICS_PROJECT_DIR, else analytics/.",
)
STATE = typer.Option(
    None, "--state", help="dbt artifacts of an earlier build, for --select state:modified+ (slim CI)."
)
DEFER = typer.Option(False, "--defer", help="Read unselected parents from the --state build (dbt's --defer).")


def _options(
    select: list[str] | None,
    exclude: list[str] | None,
    selector: str | None,
    full_refresh: bool,
    variables: str | None,
    state: Path | None = None,
    defer: bool = False,
) -> list[str]:
    from strataflow.ops import analytics

    return analytics.selection_args(select, exclude, selector, full_refresh, variables, state, defer)


@analytics_app.command("build")
def build(
    select: list[str] | None = SELECT,
    exclude: list[str] | None = EXCLUDE,
    selector: str | None = SELECTOR,
    full_refresh: bool = FULL_REFRESH,
    variables: str | None = VARS,
    quiet: bool = QUIET,
    project_dir: Path | None = PROJECT_DIR,
    state: Path | None = STATE,
    defer: bool = DEFER,
) -> None:
    """Run `dbt build` (seeds, staging views, the marts, data tests) into schema analytics, as the role
    strataflow_dbt that reads every namespace under row-level security and writes only there. Analyst roles
    then select the marts and see their granted namespaces only. dbt's progress shows as it runs;
    --select/--exclude/--selector/--full-refresh/--vars/--state/--defer go to dbt as they are. With
    --project-dir, a team's own dbt project is built: strataflow's marts (its package) and the team's models.

    Example: strataflow analytics build --select mart_llm_cost+ --full-refresh
    (then: psql "$(strataflow db url --role bi)" -c 'table analytics.mart_llm_cost')
    Example: strataflow analytics build --project-dir ~/acme-dbt --select +acme_llm_spend
    """
    from strataflow.ops import analytics

    settings = settings_or_exit()
    options = _options(select, exclude, selector, full_refresh, variables, state, defer)
    with cli_errors():
        project = analytics.project_dir_of(settings, project_dir)
        stderr(f"running dbt build {' '.join(options)} on {project} as strataflow_dbt ...".replace("  ", " "))
        _finish(
            analytics.build(settings, options=options, echo=not quiet, project_dir=project), "artifacts in"
        )


@analytics_app.command("test")
def test(
    select: list[str] | None = SELECT,
    exclude: list[str] | None = EXCLUDE,
    selector: str | None = SELECTOR,
    variables: str | None = VARS,
    quiet: bool = QUIET,
    project_dir: Path | None = PROJECT_DIR,
    state: Path | None = STATE,
    defer: bool = DEFER,
) -> None:
    """Run `dbt test` (the data tests of the sources, staging models and marts) without building.

    Example: strataflow analytics test --select mart_llm_cost
    """
    from strataflow.ops import analytics

    settings = settings_or_exit()
    with cli_errors():
        options = _options(select, exclude, selector, False, variables, state, defer)
        run = analytics.test(settings, options=options, echo=not quiet, project_dir=project_dir)
        _finish(run, "results in")


@analytics_app.command("docs")
def docs(
    select: list[str] | None = SELECT,
    exclude: list[str] | None = EXCLUDE,
    variables: str | None = VARS,
    quiet: bool = QUIET,
    project_dir: Path | None = PROJECT_DIR,
) -> None:
    """Run `dbt docs generate` and print where the site is (index.html, manifest.json, catalog.json); open it
    with `dbt docs serve --project-dir analytics --target-path DIR` or any static file server.

    Example: strataflow analytics docs
    """
    from strataflow.ops import analytics

    settings = settings_or_exit()
    with cli_errors():
        options = _options(select, exclude, None, False, variables)
        run = analytics.docs(settings, options=options, echo=not quiet, project_dir=project_dir)
        _finish(run, "docs site (index.html, catalog.json) in")


@analytics_app.command("freshness")
def freshness(project_dir: Path | None = PROJECT_DIR) -> None:
    """Run `dbt source freshness` on the runs, following the schedules: no nightly-type run started for 26
    hours warns, 50 errors; no weekly run for 8 days warns, 15 errors (exit 1 on an error). A quiet weekend
    with healthy runs raises nothing.

    Example: strataflow analytics freshness
    """
    from strataflow.ops import analytics

    settings = settings_or_exit()
    with cli_errors():
        _finish(analytics.freshness(settings, echo=True, project_dir=project_dir), "results in")


@analytics_app.command("deps")
def deps(project_dir: Path | None = PROJECT_DIR) -> None:
    """Run `dbt deps` for a team's own dbt project: install the packages it declares, strataflow's among them
    (build, test and docs do it by themselves when nothing is installed yet; run it after changing them).

    Example: strataflow analytics deps --project-dir ~/acme-dbt
    """
    from strataflow.ops import analytics

    settings = settings_or_exit()
    with cli_errors():
        _finish(analytics.deps(settings, echo=True, project_dir=project_dir), "packages of")


@analytics_app.command("sources")
def sources(
    check: bool = typer.Option(False, "--check", help="Write nothing; exit 1 when a file is out of date."),
) -> None:
    """Write the generated files of analytics/: the sources with the column comments of sql/, and the profile
    vocabulary seed. Run it after a migration changes a view or a comment.

    Example: strataflow analytics sources --check
    """
    from strataflow.ops import dbt_sources

    if check:
        stale = dbt_sources.stale_files()
        for path in stale:
            typer.echo(f"{path} is out of date: run strataflow analytics sources", err=True)
        if stale:
            raise typer.Exit(1)
        typer.echo("analytics/ generated files are up to date")
        return
    for path in dbt_sources.write_files():
        typer.echo(f"wrote {path}")


@analytics_app.command("env")
def env() -> None:
    """Print `export` lines for analytics/profiles.yml (the role strataflow_dbt, its password, host, port,
    database) and STRATAFLOW_DBT_PACKAGE (where strataflow's dbt project is, for a team's packages.yml), to
    run dbt by hand: eval "$(strataflow analytics env)"; dbt build --project-dir analytics --profiles-dir
    analytics.
    """
    import shlex

    from strataflow.ops import analytics

    settings = settings_or_exit()
    with cli_errors():
        variables = analytics.dbt_environment(settings, analytics.ensure_builder(settings))
        for name, value in variables.items():
            typer.echo(f"export {name}={shlex.quote(value)}")


def register(app: typer.Typer) -> None:
    """Add `analytics` to the strataflow app."""
    app.add_typer(analytics_app, name="analytics")
