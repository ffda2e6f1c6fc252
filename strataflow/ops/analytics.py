"""`strataflow analytics build|docs`: the dbt project in analytics/ against the current database.

dbt logs in as `strataflow_dbt`, a login role of the group strataflow_transform (sql/240): it reads the
tables and views of every namespace under row-level security (a SELECT-only policy; no BYPASSRLS, no
superuser) and may create relations only in schema analytics. The role is made on first use with a
generated password (a SCRAM verifier on the server; the password in STRATAFLOW_HOME/secrets like every
role's). dbt runs in a subprocess with the project's Python, its profile from analytics/profiles.yml and the
connection in environment variables (no password on any command line or file of the project); its target
and logs go under STRATAFLOW_HOME/analytics, so two homes never share them.

A team keeps its own models in a dbt project of its own, outside the checkout (`--project-dir DIR`, or
STRATAFLOW_ANALYTICS_PROJECT_DIR): that project installs analytics/ as a dbt package (its packages.yml names
`local: "{{ env_var('STRATAFLOW_DBT_PACKAGE') }}"`, the path dbt_environment sets), so one build makes
strataflow's sources, staging models and marts and the team's models on them, with strataflow's macros
(`strataflow.secure_mart()`). `dbt deps` runs first when the project has not installed its packages yet.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from psycopg.conninfo import conninfo_to_dict
from sqlalchemy import text

from models.analytics import AnalyticsRun, DbtNodeResult
from strataflow.config import Settings
from strataflow.db import passwords
from strataflow.db.engine import engine_for, libpq_url
from strataflow.errors import UserError
from strataflow.ops.dbt_sources import ANALYTICS_DIR

BUILDER = "strataflow_dbt"
BUILDER_GROUP = "strataflow_transform"
DBT_TIMEOUT_S = 1800.0
PACKAGE_VARIABLE = "STRATAFLOW_DBT_PACKAGE"  # where strataflow's dbt project is, for a team's packages.yml
PACKAGE_FILES = ("packages.yml", "dependencies.yml")


class AnalyticsFailed(RuntimeError):
    """dbt failed (a node errored or a test failed): the flow run that ran it fails with these errors."""


SELECT_BUILDER = text(
    """
    select r.rolcanlogin, pg_has_role(r.oid, 'strataflow_transform', 'member') as in_group
    from pg_roles as r where r.rolname = :name
    """
)


def work_dir(settings: Settings, project_dir: Path = ANALYTICS_DIR) -> Path:
    """Where dbt writes its target (manifest, catalog, run results) and logs for this STRATAFLOW_HOME: the
    home's analytics/ for strataflow's project, a folder of its own under it for a team's project."""
    if project_dir.resolve() == ANALYTICS_DIR.resolve():
        return settings.home / "analytics"
    digest = hashlib.sha256(str(project_dir.resolve()).encode("utf-8")).hexdigest()[:8]
    return settings.home / "analytics" / "projects" / f"{project_dir.resolve().name}-{digest}"


def project_dir_of(settings: Settings, given: Path | None = None) -> Path:
    """The dbt project to run: the one given, else STRATAFLOW_ANALYTICS_PROJECT_DIR, else analytics/. A team's
    project must have a dbt_project.yml and install strataflow's project as a package."""
    project = (given or settings.analytics_project_dir or ANALYTICS_DIR).expanduser().resolve()
    if not (project / "dbt_project.yml").exists():
        raise UserError(f"no dbt project at {project}: it has no dbt_project.yml")
    if project == ANALYTICS_DIR.resolve() or _project_name(project) == "strataflow":  # ours, or a copy
        return project
    declared = " ".join(
        (project / name).read_text(encoding="utf-8") for name in PACKAGE_FILES if (project / name).exists()
    )
    if PACKAGE_VARIABLE not in declared and "strataflow" not in declared.lower():
        raise UserError(
            f"the dbt project at {project} does not install strataflow's dbt project: add a packages.yml "
            f"with `packages: [{{local: \"{{{{ env_var('{PACKAGE_VARIABLE}') }}}}\"}}]` (docs/analytics.md, "
            '"A team\'s own dbt project")'
        )
    return project


def _project_name(project_dir: Path) -> str:
    import yaml

    spec = yaml.safe_load((project_dir / "dbt_project.yml").read_text(encoding="utf-8")) or {}
    return str(spec.get("name", "")) if isinstance(spec, dict) else ""


def profiles_dir_of(project_dir: Path) -> Path:
    """The project's own profiles.yml when it has one, else strataflow's (the connection from variables)."""
    return project_dir if (project_dir / "profiles.yml").exists() else ANALYTICS_DIR


def needs_deps(project_dir: Path) -> bool:
    """True when a team's project declares packages that are not installed yet (no dbt_packages/)."""
    declares = any((project_dir / name).exists() for name in PACKAGE_FILES)
    return declares and not (project_dir / "dbt_packages").is_dir()


def ensure_builder(settings: Settings) -> str:
    """The dbt login role (created on first use, in strataflow_transform) and its password."""
    engine = engine_for(settings)
    with engine.begin() as conn:
        if conn.execute(text("select to_regrole(:g)"), {"g": BUILDER_GROUP}).scalar() is None:
            raise UserError("the database has no analytics schema yet: run `strataflow db upgrade` first")
        row = conn.execute(SELECT_BUILDER, {"name": BUILDER}).first()
        if row is None:
            conn.execute(text(f"create role {BUILDER} login inherit in role {BUILDER_GROUP}"))
        elif not (row.rolcanlogin and row.in_group):
            raise UserError(f"role {BUILDER} exists but is not a login role of {BUILDER_GROUP}; drop it")
        password = passwords.role_password(settings.home, BUILDER)
        if row is None or password is None:
            password = passwords.generate_password()
            passwords.set_password(conn.connection.dbapi_connection, BUILDER, password)  # type: ignore[arg-type]
            passwords.store_role_password(settings.home, BUILDER, password)
    return password


def dbt_environment(settings: Settings, password: str) -> dict[str, str]:
    """The variables analytics/profiles.yml reads, for the current database, as strataflow_dbt."""
    info = conninfo_to_dict(libpq_url(settings))
    env = {
        "STRATAFLOW_DBT_HOST": str(info.get("host") or "localhost"),
        "STRATAFLOW_DBT_PORT": str(info.get("port") or "5432"),
        "STRATAFLOW_DBT_DBNAME": str(info.get("dbname") or "postgres"),
        "STRATAFLOW_DBT_USER": BUILDER,
        "STRATAFLOW_DBT_PASSWORD": password,
        "STRATAFLOW_DBT_SSLMODE": str(info.get("sslmode") or "prefer"),
        # Days and ISO weeks of the marts in STRATAFLOW_TIMEZONE, as on strataflow's own connections.
        "PGTZ": settings.timezone,
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
        "DBT_VERSION_CHECK": "false",
        PACKAGE_VARIABLE: str(ANALYTICS_DIR.resolve()),
        # `--select +model` runs the tests of what it builds, not a relationship test whose other side it
        # does not build (which fails while that side was never built: a new database, a team's first
        # build). DBT_INDIRECT_SELECTION in the caller's environment wins.
        "DBT_INDIRECT_SELECTION": os.environ.get("DBT_INDIRECT_SELECTION", "buildable"),
    }
    return env


def _results(path: Path) -> list[DbtNodeResult]:
    """The nodes of dbt's results file (run_results.json; sources.json for source freshness)."""
    if not path.exists():
        return []
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    rows = []
    for result in data.get("results", []):
        unique_id = str(result.get("unique_id", ""))
        parts = unique_id.split(".")
        rows.append(
            DbtNodeResult(
                name=parts[-1] if parts[0] != "test" else ".".join(parts[2:-1]) or parts[-1],
                resource_type=parts[0],
                status=str(result.get("status")),
                execution_time_s=round(float(result.get("execution_time") or 0.0), 3),
                message=result.get("message"),
            )
        )
    return rows


def run_dbt(
    settings: Settings, args: list[str], project_dir: Path | None = None, echo: bool = False
) -> AnalyticsRun:
    """Run `dbt ARGS` as strataflow_dbt on the project (project_dir_of: analytics/ or a team's own, whose
    packages are installed first when they are not yet); the outcome and per-node results (never raises for
    a failing node: the caller decides). With echo, dbt's own progress lines go to stderr as dbt prints
    them."""
    project = project_dir_of(settings, project_dir)
    if importlib.util.find_spec("dbt") is None:
        raise UserError("dbt is not installed: pip install -e '.[analytics]' (or '.[dev]')")
    if args[0] != "deps" and needs_deps(project):
        installed = run_dbt(settings, ["deps"], project, echo)
        if not installed.success:
            return installed
    work = work_dir(settings, project)
    target, logs = work / "target", work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    results_file = target / ("sources.json" if args[:2] == ["source", "freshness"] else "run_results.json")
    results_file.unlink(missing_ok=True)
    env = {**os.environ, **dbt_environment(settings, ensure_builder(settings))}
    command = [
        sys.executable,
        "-c",
        "from dbt.cli.main import cli; cli()",
        *args,
        "--project-dir",
        str(project),
        "--profiles-dir",
        str(profiles_dir_of(project)),
        *(["--target-path", str(target)] if args[0] != "deps" else []),  # deps writes no target
        "--log-path",
        str(logs),
    ]
    returncode, output = _run_streaming(command, env, project, echo)
    (logs / f"{args[0]}.out").write_text(output, encoding="utf-8")
    error = None if returncode == 0 else _error_lines(output)
    return AnalyticsRun(
        command=" ".join(["dbt", *args]),
        success=returncode == 0,
        target_dir=str(target),
        log_path=str(logs / f"{args[0]}.out"),
        results=_results(results_file),
        error=error,
    )


def _run_streaming(command: list[str], env: dict[str, str], cwd: Path, echo: bool) -> tuple[int, str]:
    """Run dbt, keeping its output (and copying each line to stderr as it comes, with echo)."""
    lines: list[str] = []
    with subprocess.Popen(
        command, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
    ) as process:
        timer = threading.Timer(DBT_TIMEOUT_S, process.kill)
        timer.start()
        try:
            assert process.stdout is not None
            for line in process.stdout:
                lines.append(line)
                if echo:
                    sys.stderr.write(line)
                    sys.stderr.flush()
            returncode = process.wait()
        finally:
            timed_out = not timer.is_alive()
            timer.cancel()
    if timed_out and returncode != 0:
        raise UserError(f"dbt {' '.join(command[3:5])} did not finish within {DBT_TIMEOUT_S:.0f} s")
    return returncode, "".join(lines)


def _error_lines(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    wanted = [line for line in lines if any(word in line for word in ("Error", "ERROR", "FAIL", "error"))]
    return " | ".join((wanted or lines)[-6:])[-1500:]


def selection_args(
    select: list[str] | None = None,
    exclude: list[str] | None = None,
    selector: str | None = None,
    full_refresh: bool = False,
    variables: str | None = None,
    state: Path | None = None,
    defer: bool = False,
) -> list[str]:
    """dbt's node selection and run options, as `strataflow analytics build|test|docs` pass them through
    (state and defer: slim CI, `--select state:modified+` against the artifacts of an earlier build)."""
    args: list[str] = []
    if select:
        args += ["--select", *select]
    if exclude:
        args += ["--exclude", *exclude]
    if selector:
        args += ["--selector", selector]
    if full_refresh:
        args.append("--full-refresh")
    if variables:
        args += ["--vars", variables]
    if state is not None:
        args += ["--state", str(state)]
    if defer:
        args.append("--defer")
    return args


def build(
    settings: Settings,
    full_refresh: bool = False,
    options: list[str] | None = None,
    echo: bool = False,
    project_dir: Path | None = None,
) -> AnalyticsRun:
    """`dbt build`: seeds, staging views, the marts in schema analytics, and the data tests (of a team's
    project: strataflow's package and the team's models)."""
    extra = list(options or [])
    if full_refresh and "--full-refresh" not in extra:
        extra.append("--full-refresh")
    return run_dbt(settings, ["build", *extra], project_dir, echo)


def test(
    settings: Settings, options: list[str] | None = None, echo: bool = False, project_dir: Path | None = None
) -> AnalyticsRun:
    """`dbt test`: the data tests (and unit tests) of the selected nodes."""
    return run_dbt(settings, ["test", *(options or [])], project_dir, echo)


def docs(
    settings: Settings, options: list[str] | None = None, echo: bool = False, project_dir: Path | None = None
) -> AnalyticsRun:
    """`dbt docs generate`: manifest.json, catalog.json and index.html in the target directory."""
    return run_dbt(settings, ["docs", "generate", *(options or [])], project_dir, echo)


def freshness(settings: Settings, echo: bool = False, project_dir: Path | None = None) -> AnalyticsRun:
    """`dbt source freshness`: warn or error when the nightly's or the weekly's relations are stale."""
    return run_dbt(settings, ["source", "freshness"], project_dir, echo)


def deps(settings: Settings, echo: bool = False, project_dir: Path | None = None) -> AnalyticsRun:
    """`dbt deps`: install the packages a team's project declares (strataflow's among them)."""
    return run_dbt(settings, ["deps"], project_dir, echo)


def results_table(run: AnalyticsRun) -> list[dict[str, Any]]:
    """The run's nodes as rows of a Prefect table artifact (name, type, status, seconds, message)."""
    return [
        {
            "node": r.name,
            "type": r.resource_type,
            "status": r.status,
            "seconds": r.execution_time_s,
            "message": (r.message or "")[:200],
        }
        for r in run.results
    ]
