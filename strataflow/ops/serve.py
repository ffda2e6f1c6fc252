"""`strataflow serve`: a local Prefect server, the work pool, the `llm` limit, the deployments, one worker,
and (with STRATAFLOW_ALERT_WEBHOOK) the alert automation.

The server's UI reads its API address from /ui-settings, which Prefect fills from PREFECT_UI_API_URL, else
from PREFECT_SERVER_API_HOST:PORT (4200 by default): not from `prefect server start --port`. So serve sets
PREFECT_UI_API_URL (and the server's host and port settings) from --host and --port; the UI then works on
any port. It sets PREFECT_UI_URL too: the server renders the alerts' links to a flow run (the `ui_url`
filter of the automation's payload) from it, and without it every alert's flow_run_url was null.

While it runs, serve reaps crashed runs every minute (strataflow/pipeline/runs.py reap_crashed): a run of
any flow whose process died (kill -9, out of memory) is marked crashed in pipeline_runs and Crashed in
Prefect, even when no later run of its flow comes to do it.

Order: the server, the work pool, the worker, the `fresh` deployment with its event trigger, the alert
automation, one catch-up run of `fresh` (messages posted before the trigger existed), then the `llm` limit
and the other deployments; so posted messages become memory while the rest is still being registered
(flows/fresh.py).

Children run in their own sessions so Ctrl-C reaches only us; we then stop the worker (SIGINT twice: one
may leave a Prefect worker running for 20 s or more) and the server.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from strataflow.config import Settings
from strataflow.errors import UserError
from strataflow.ops.flow_runner import prefect_environment
from strataflow.ops.freshness import forget_api_url, record_api_url

logger = logging.getLogger(__name__)

PROJECT_ROOT = Path(__file__).resolve().parents[2]
HEALTH_TIMEOUT_S = 120.0


def api_url(port: int, host: str = "127.0.0.1") -> str:
    """The API address clients and the UI use (a wildcard bind address is reached on 127.0.0.1)."""
    reach = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    if ":" in reach and not reach.startswith("["):
        reach = f"[{reach}]"
    return f"http://{reach}:{port}/api"


def server_environment(env: dict[str, str], host: str, port: int) -> dict[str, str]:
    """The server process's environment: no PREFECT_API_URL (it is the API), and the UI's API URL, host and
    port set from what it serves on (a PREFECT_UI_API_URL of the caller's, e.g. a public name behind a proxy,
    is kept)."""
    server_env = {key: value for key, value in env.items() if key != "PREFECT_API_URL"}
    server_env.setdefault("PREFECT_UI_API_URL", api_url(port, host))
    server_env.setdefault("PREFECT_UI_URL", server_env["PREFECT_UI_API_URL"].removesuffix("/api"))
    server_env.update({"PREFECT_SERVER_API_HOST": host, "PREFECT_SERVER_API_PORT": str(port)})
    return server_env


def wait_healthy(
    url: str, process: subprocess.Popen[bytes] | None = None, timeout_s: float = HEALTH_TIMEOUT_S
) -> None:
    """Poll {url}/health until it answers; fail early when the server process has exited."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise UserError(f"the Prefect server exited with code {process.returncode} before it was healthy")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.5)
    raise UserError(f"the Prefect server at {url} was not healthy after {timeout_s:.0f} s")


def is_healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def prefect_command(
    args: list[str], env: dict[str, str], check: bool = True
) -> subprocess.CompletedProcess[str]:
    """Run `prefect ARGS` with the project's Python (the worker and deploy must see the installed project)."""
    command = [sys.executable, "-m", "prefect", *args]
    result = subprocess.run(command, env=env, cwd=PROJECT_ROOT, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise UserError(
            f"`prefect {' '.join(args)}` failed: {(result.stderr or result.stdout).strip()[-800:]}"
        )
    return result


CATCH_UP_WAIT_S = 150.0  # the other deployments register after the catch-up run (or this long)
FIRST_DEPLOYMENT = "fresh"  # registered first: posted messages become memory while the others deploy


def deployment_names() -> list[str]:
    import yaml

    spec = yaml.safe_load((PROJECT_ROOT / "prefect.yaml").read_text(encoding="utf-8"))
    return [str(deployment["name"]) for deployment in spec["deployments"]]


def ensure_pool(url: str, pool: str) -> None:
    """The process work pool, created through the client in this process (a `prefect work-pool` command
    costs a Python start-up, which on a busy machine is most of the wait)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import WorkPoolCreate
    from prefect.exceptions import ObjectNotFound
    from prefect.settings import PREFECT_API_URL, temporary_settings
    from prefect.workers.process import ProcessWorker

    with temporary_settings({PREFECT_API_URL: url}), get_client(sync_client=True) as client:
        try:
            client.read_work_pool(pool)
        except ObjectNotFound:
            template = ProcessWorker.get_default_base_job_template()
            client.create_work_pool(WorkPoolCreate(name=pool, type="process", base_job_template=template))


def bootstrap_first(env: dict[str, str], pool: str) -> None:
    """The work pool and the `fresh` deployment with its trigger (what a worker needs to turn posted messages
    into memory); the rest follows in bootstrap_rest."""
    if not (PROJECT_ROOT / "prefect.yaml").exists():
        raise UserError(
            f"no prefect.yaml in {PROJECT_ROOT}: serve needs the project checkout (pip install -e .)"
        )
    ensure_pool(env["PREFECT_API_URL"], pool)
    prefect_command(["--no-prompt", "deploy", "--name", FIRST_DEPLOYMENT], env)


def bootstrap_rest(env: dict[str, str], llm_limit: int) -> None:
    """Global concurrency limit `llm` and every other deployment of prefect.yaml."""
    if prefect_command(["gcl", "inspect", "llm"], env, check=False).returncode != 0:
        created = prefect_command(["gcl", "create", "llm", "--limit", str(llm_limit)], env, check=False)
        if created.returncode != 0:  # a first fresh run may have created it meanwhile (begin_run)
            prefect_command(["gcl", "inspect", "llm"], env)
    names = [name for name in deployment_names() if name != FIRST_DEPLOYMENT]
    prefect_command(["--no-prompt", "deploy", *(arg for name in names for arg in ("--name", name))], env)


def bootstrap(env: dict[str, str], pool: str, llm_limit: int) -> None:
    """Work pool, global concurrency limit `llm`, and every deployment of prefect.yaml from the checkout."""
    bootstrap_first(env, pool)
    bootstrap_rest(env, llm_limit)


def _stop(process: subprocess.Popen[bytes], signals: tuple[int, ...], wait_s: float) -> None:
    for sig in signals:
        if process.poll() is not None:
            return
        os.killpg(process.pid, sig)
        try:
            process.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def register_alerts(settings: Settings, url: str) -> None:
    """With STRATAFLOW_ALERT_WEBHOOK set: the `strataflow-alerts` automation on the server at url."""
    if settings.alert_webhook is None:
        return
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from strataflow.ops import alerts

    with temporary_settings({PREFECT_API_URL: url}):
        alerts.register_alerts(
            settings.alert_webhook.get_secret_value(),
            settings.alert_webhook_allow_private,
            settings.alert_late_after_minutes,
        )
    print("registered the strataflow-alerts automation (STRATAFLOW_ALERT_WEBHOOK)", file=sys.stderr)


def catch_up(url: str) -> None:
    """One run of the `fresh` deployment for every namespace: what was posted while serve was starting (before
    the trigger existed) becomes memory now too (flows/fresh.py)."""
    from prefect.deployments import run_deployment
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings({PREFECT_API_URL: url}):
        run_deployment("fresh/fresh", parameters={}, timeout=CATCH_UP_WAIT_S)  # alone on the CPU first


REAP_EVERY_S = 60.0


def reap(settings: Settings, url: str) -> None:
    """Mark the runs of this host whose process died crashed, in pipeline_runs and in Prefect at url."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from strataflow.db.engine import engine_for
    from strataflow.pipeline import prefect_runs
    from strataflow.pipeline.runs import reap_crashed

    prefect_runs.install()  # a crashed run is set Crashed in Prefect too

    try:
        with temporary_settings({PREFECT_API_URL: url}):
            reap_crashed(engine_for(settings))
    except Exception as exc:  # noqa: BLE001 (the database away for a moment must not stop serve)
        logger.warning("could not reap crashed runs: %s", exc)


def serve(
    settings: Settings, port: int = 4200, pool: str = "strataflow-pool", host: str = "127.0.0.1"
) -> None:
    """Start everything, print the UI address, and keep running until Ctrl-C, SIGTERM or a child exits."""
    signal.signal(signal.SIGINT, _interrupt)  # also when started in the background, where SIGINT is ignored
    signal.signal(signal.SIGTERM, _interrupt)
    env = prefect_environment(settings)
    url = api_url(port, host)
    if is_healthy(url):
        raise UserError(f"something already answers on {url}; stop it or choose --port")
    env = {**env, "PREFECT_API_URL": url, "PWD": str(PROJECT_ROOT)}
    log_dir = Path(env["PREFECT_HOME"]) / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    server_log = (log_dir / "server.log").open("ab")
    server_env = server_environment(env, host, port)
    log_file = log_dir / "server.log"
    print(f"starting the Prefect server on {host}:{port} (log: {log_file}) ...", file=sys.stderr)
    server = subprocess.Popen(
        [sys.executable, "-m", "prefect", "server", "start", "--host", host, "--port", str(port)],
        env=server_env,
        stdout=server_log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    worker: subprocess.Popen[bytes] | None = None
    try:
        wait_healthy(url, server)
        record_api_url(settings, url)  # `strataflow api` of this home sends its message events here
        print("registering the work pool and the fresh deployment ...", file=sys.stderr)
        ensure_pool(url, pool)
        worker = subprocess.Popen(  # starts while the fresh deployment registers
            [sys.executable, "-m", "prefect", "worker", "start", "--pool", pool],
            env=env,
            cwd=PROJECT_ROOT,
            start_new_session=True,
        )
        bootstrap_first(env, pool)
        register_alerts(settings, url)
        catch_up(url)
        print("registering the llm limit and the other deployments ...", file=sys.stderr)
        bootstrap_rest(env, settings.llm_concurrency)
        print(
            f"Prefect UI: {url.removesuffix('/api')}  (deployments nightly, weekly, incremental, fresh,"
            " assets, backfill;"
            f" pool {pool})\nStart a backfill: Deployments > backfill > Run > Custom run."
            " Ctrl-C stops the worker and the server.",
            file=sys.stderr,
        )
        reaped_at = 0.0
        while server.poll() is None and worker.poll() is None:
            if time.monotonic() - reaped_at >= REAP_EVERY_S:
                reap(settings, url)
                reaped_at = time.monotonic()
            time.sleep(1)
    except KeyboardInterrupt:
        print("stopping the worker and the server ...", file=sys.stderr)
    finally:
        forget_api_url(settings, url)
        if worker is not None:
            _stop(worker, (signal.SIGINT, signal.SIGINT, signal.SIGTERM), 5.0)
        _stop(server, (signal.SIGTERM, signal.SIGINT), 10.0)
        server_log.close()
