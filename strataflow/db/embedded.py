"""The embedded PostgreSQL 16 + pgvector (pgserver wheel): one detached server per STRATAFLOW_HOME.

The server is started by the first process that needs it and left running for every later process and
command; `strataflow db stop` stops it. Connections use a Unix socket (no TCP port is opened).
"""

from __future__ import annotations

import logging
import os
import subprocess
import warnings
from pathlib import Path

logger = logging.getLogger(__name__)

# pgserver's import asks platformdirs for XDG_RUNTIME_DIR, which servers and CI often lack; the /tmp
# fallback is fine, the warning is noise on every command.
warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR", module="platformdirs")


def pgdata_dir(home: Path) -> Path:
    return home / "pg"


def _running_uri(pgdata: Path) -> str | None:
    """URI of a server already running on pgdata, without taking pgserver's global lock."""
    from pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is not None and info.is_running() and info.status == "ready":
        return info.get_uri()
    return None


def ensure_running(home: Path) -> str:
    """Start (or reuse) the embedded server for this home; return its libpq URI."""
    pgdata = pgdata_dir(home)
    if pgdata.exists() and (uri := _running_uri(pgdata)):
        return uri
    home.mkdir(parents=True, exist_ok=True)
    import pgserver

    logger.info("starting the embedded PostgreSQL under %s", pgdata)
    # cleanup_mode=None: the server outlives this process, so every command shares one server.
    server = pgserver.get_server(pgdata, cleanup_mode=None)
    return server.get_uri()


def is_running(home: Path) -> bool:
    pgdata = pgdata_dir(home)
    return pgdata.exists() and _running_uri(pgdata) is not None


def _run_as_server_user(args: list[str]) -> subprocess.CompletedProcess[str]:
    """pgserver runs postgres as the 'pgserver' user when we are root; its tools must run as that user too."""
    if os.name != "nt" and os.geteuid() == 0:
        args = ["su", "pgserver", "-s", "/bin/sh", "-c", " ".join(_quote(a) for a in args)]
    return subprocess.run(args, capture_output=True, text=True)


def _quote(arg: str) -> str:
    import shlex

    return shlex.quote(arg)


def stop(home: Path) -> bool:
    """Stop the embedded server of this home. Returns False when none was running."""
    from pgserver._commands import POSTGRES_BIN_PATH

    pgdata = pgdata_dir(home)
    if not is_running(home):
        return False
    result = _run_as_server_user(
        [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(pgdata), "-w", "-m", "fast", "stop"]
    )
    if result.returncode != 0:
        raise RuntimeError(f"pg_ctl stop failed for {pgdata}: {result.stderr.strip()}")
    return True


def backup(uri: str, out: Path) -> None:
    """Dump the database with the pg_dump bundled in the wheel (custom format, restore with pg_restore)."""
    from pgserver._commands import POSTGRES_BIN_PATH

    out = out.resolve()
    result = subprocess.run(
        [str(POSTGRES_BIN_PATH / "pg_dump"), "--format=custom", f"--file={out}", uri],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise RuntimeError(f"pg_dump failed: {result.stderr.strip()}")
