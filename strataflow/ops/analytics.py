"""`strataflow analytics build|docs`: the dbt project in analytics/ against the current database.

dbt logs in as `strataflow_dbt`, a login role of the group strataflow_transform (sql/240): it reads the
tables and views of every namespace under row-level security (a SELECT-only policy; no BYPASSRLS, no
superuser) and may create relations only in schema analytics. The role is made on first use with a
generated password (a SCRAM verifier on the server; the password in STRATAFLOW_HOME/secrets like every
role's). dbt runs in a subprocess with the project's Python, its profile from analytics/profiles.yml and the
connection in environment variables (no password on any command line or file of the project); its target
and logs go under STRATAFLOW_HOME/analytics, so two homes never share them.
"""

from __future__ import annotations

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


class AnalyticsFailed(RuntimeError):
    """dbt failed (a node errored or a test failed): the flow run that ran it fails with these errors."""


SELECT_BUILDER = text(
    """
    select r.rolcanlogin, pg_has_role(r.oid, 'strataflow_transform', 'member') as in_group
    from pg_roles as r where r.rolname = :name
    """
)


def work_dir(settings: Settings) -> Path:
    """Where dbt writes its target (manifest, catalog, run results) and logs for this STRATAFLOW_HOME."""
    return settings.home / "analytics"


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
    settings: Settings, args: list[str], project_dir: Path = ANALYTICS_DIR, echo: bool = False
) -> AnalyticsRun:
    """Run `dbt ARGS` on the project as strataflow_dbt; the outcome and per-node results (never raises for a
    failing node: the caller decides). With echo, dbt's own progress lines go to stderr as dbt prints them."""
    if not (project_dir / "dbt_project.yml").exists():
        raise UserError(f"no dbt project at {project_dir} (analytics/dbt_project.yml of the checkout)")
    if importlib.util.find_spec("dbt") is None:
        raise UserError("dbt is not installed: pip install -e '.[analytics]' (or '.[dev]')")
    work = work_dir(settings)
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
        str(project_dir),
        "--profiles-dir",
        str(project_dir),
        "--target-path",
        str(target),
        "--log-path",
        str(logs),
    ]
    returncode, output = _run_streaming(command, env, project_dir, echo)
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
) -> list[str]:
    """dbt's node selection and run options, as `strataflow analytics build|test|docs` pass them through."""
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
    return args


def build(
    settings: Settings, full_refresh: bool = False, options: list[str] | None = None, echo: bool = False
) -> AnalyticsRun:
    """`dbt build`: seeds, staging views, the marts in schema analytics, and the data tests."""
    extra = list(options or [])
    if full_refresh and "--full-refresh" not in extra:
        extra.append("--full-refresh")
    return run_dbt(settings, ["build", *extra], echo=echo)


def test(settings: Settings, options: list[str] | None = None, echo: bool = False) -> AnalyticsRun:
    """`dbt test`: the data tests (and unit tests) of the selected nodes."""
    return run_dbt(settings, ["test", *(options or [])], echo=echo)


def docs(settings: Settings, options: list[str] | None = None, echo: bool = False) -> AnalyticsRun:
    """`dbt docs generate`: manifest.json, catalog.json and index.html in the target directory."""
    return run_dbt(settings, ["docs", "generate", *(options or [])], echo=echo)


def freshness(settings: Settings, echo: bool = False) -> AnalyticsRun:
    """`dbt source freshness`: warn or error when the nightly's or the weekly's relations are stale."""
    return run_dbt(settings, ["source", "freshness"], echo=echo)


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
