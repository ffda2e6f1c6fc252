"""The embedded PostgreSQL 16 + pgvector (pgserver wheel): one detached server per STRATAFLOW_HOME.

The server is started by the first process that needs it and left running for every later process and
command; `strataflow db stop` stops it. Connections use a Unix socket; with STRATAFLOW_DB_PORT=P the server
also listens on 127.0.0.1:P (SCRAM passwords, as on the socket), for BI tools that speak JDBC or TCP only.
The port is taken when the server starts, and only then: a running server is never restarted for a port (a
command run with another STRATAFLOW_DB_PORT would otherwise drop every connection of the shared server), and
when another process holds the port the server starts on its socket alone and says so, instead of failing
to start at all. `strataflow db url --role R` prints a TCP URL only for the port the server listens on.

Every URL made here asks libpq to accept SCRAM and nothing else (`require_auth=scram-sha-256`, SCRAM_ONLY): a
process that took the port while the server was down and asks for a cleartext (or MD5) password gets none,
and SCRAM proves the server knows the role's verifier. Unauthenticated logins are cut after
authentication_timeout (SERVER_RELOAD_SETTINGS: 10 s), so logins that stall cannot hold the server's
connections for a minute each; each agent or analyst login holds at most strataflow.db.roles.ROLE_CONNECTIONS.

Authentication: pgserver's initdb trusts every local login. The first start under this code (a new home, or
a home made by an older strataflow) secures it once: the owner (postgres) gets a generated password, every
other login role without a password gets one (strataflow.db.passwords keeps them, mode 0600), and
pg_hba.conf is rewritten to scram-sha-256 for every role and reloaded. From then on a URL without the right
password is refused, the owner's included.

Settings: the server gets WAL buffers sized for bulk writes (SERVER_SETTINGS_MB), applied with ALTER SYSTEM
and one restart when a home is first secured, or when this code first starts a home secured before it.

The home is private: 0700, or 0711 when strataflow runs as root and the server runs as the 'pgserver' user,
who must traverse it to reach its data directory. pgserver opens every parent folder of the data directory
to group and others (g+rx, o+rx) each time it starts a server (measured: the home was 0755 after every
start), so the home's mode is set again after each start (secure_home).
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from strataflow.db import passwords

logger = logging.getLogger(__name__)

# pgserver's import asks platformdirs for XDG_RUNTIME_DIR, which servers and CI often lack; the /tmp
# fallback is fine, the warning is noise on every command.
warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR", module="platformdirs")


def pgdata_dir(home: Path) -> Path:
    return home / "pg"


OWNER = "postgres"
DEFAULT_PORT = 5432
TCP_HOST = "127.0.0.1"
SCRAM_ONLY = "require_auth=scram-sha-256"
HBA_MARKER = "# strataflow: every login needs its password (scram-sha-256)"
HBA_RULES = f"""{HBA_MARKER}
# TYPE  DATABASE  USER  ADDRESS       METHOD
local   all       all                 scram-sha-256
host    all       all   127.0.0.1/32  scram-sha-256
host    all       all   ::1/128       scram-sha-256
"""
# Login roles that could only log in because the server trusted them (a password set by hand stays).
SELECT_ROLES_WITHOUT_PASSWORD = (
    "select rolname from pg_authid"
    " where rolcanlogin and rolpassword is null and rolname <> current_user and rolname !~ '^pg_'"
)


# PostgreSQL's default WAL buffers (1/32 of shared_buffers: 4 MB) fill many times per chunk of a bulk ingest
# (200k messages write about 350 MB of WAL): each time, a writer writes WAL itself, 8 kB at a time, under the
# one lock both writers need (38k writes per 200k rows; sampled, the writers spent about a fifth of a backend
# waiting for that lock). With 64 MB the WAL writer writes in the background instead. Measured in one process,
# alternating 8 times: ingest/COPY ratio 0.864 against 0.790 at the median (docs/ingest-performance.md).
# Bigger shared buffers (1 GB) made the same ingest slower, so they stay at the default.
SERVER_SETTINGS_MB = {"wal_buffers": 64}
PAGE_KB = 8  # pg_settings counts wal_buffers in 8 kB pages
# Settings a reload applies (pg_settings' unit in parentheses). authentication_timeout (s): a login that
# has not authenticated within it is dropped (PostgreSQL's default, 60 s, let 100 stalled logins hold every
# connection, the owner's reserved ones included, for a minute).
SERVER_RELOAD_SETTINGS = {"authentication_timeout": 10}


class EmbeddedAuthError(RuntimeError):
    """The embedded server requires a password this home does not have; the message says what to do."""


def _running_uri(pgdata: Path) -> str | None:
    """URI of a server already running on pgdata (no password), without taking pgserver's global lock."""
    from pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is not None and info.is_running() and info.status == "ready":
        uri = info.get_uri()
        if info.socket_dir is not None and info.port not in (None, DEFAULT_PORT):
            uri += f"&port={info.port}"  # the socket's file name carries the port (.s.PGSQL.P)
        return uri
    return None


def _listening(pgdata: Path) -> tuple[int | None, str | None]:
    """(port, first TCP listen address or None) of the running server, from postmaster.pid."""
    from pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is None:
        return None, None
    return info.port, info.hostname or None


def listening_port(home: Path) -> int | None:
    """The TCP port on 127.0.0.1 the running server listens on (None: its socket only, or not running)."""
    port, host = _listening(pgdata_dir(home))
    return port if host == TCP_HOST and is_running(home) else None


def port_is_free(port: int) -> bool:
    """Whether nothing listens on 127.0.0.1:port now (another process's listener would make the server's
    start fail, or answer its clients)."""
    import socket

    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((TCP_HOST, port))
        except OSError:
            return False
    return True


def listen_tcp(home: Path, port: int) -> bool:
    """Make the server this process has just started listen on 127.0.0.1:port as well as on its socket (one
    restart under the home's lock, before anyone uses it); True when it listens there. A port another process
    holds leaves it on its socket alone, with a warning: it still starts. pg_hba.conf already asks every TCP
    login from 127.0.0.1 for its SCRAM password (HBA_RULES)."""
    from pgserver.utils import PostmasterInfo

    pgdata = pgdata_dir(home)
    with _home_lock(home):
        info = PostmasterInfo.read_from_pgdata(pgdata)
        if info is None or (info.port, info.hostname) == (port, TCP_HOST):
            return info is not None
        if not port_is_free(port):
            logger.warning(
                "127.0.0.1:%d is held by another process: the embedded PostgreSQL under %s listens on its "
                "socket only (STRATAFLOW_DB_PORT); free the port, then `strataflow db stop` and run again",
                port, pgdata,
            )  # fmt: skip
            return False
        socket_dir = [f"-k {info.socket_dir}"] if info.socket_dir is not None else []
        logger.info("restarting the embedded PostgreSQL under %s to listen on %s:%d", pgdata, TCP_HOST, port)
        try:
            _fast_pg_ctl(
                pgdata, "restart", *_options(pgdata, f"-h {TCP_HOST}", f"-p {int(port)}", *socket_dir)
            )
        except RuntimeError:  # the port was taken meanwhile: on the socket, as before, rather than down
            logger.warning(
                "could not listen on 127.0.0.1:%d; the embedded PostgreSQL keeps its socket only", port
            )
            _fast_pg_ctl(
                pgdata, "start", *_options(pgdata, '-h ""', f"-p {info.port or DEFAULT_PORT}", *socket_dir)
            )
        finally:
            secure_home(home)
    return _listening(pgdata) == (port, TCP_HOST)


def _options(pgdata: Path, *options: str) -> list[str]:
    """pg_ctl's -o options for the server, and its log file."""
    return [*(item for option in options for item in ("-o", option)), "-l", str(pgdata / "log")]


def tcp_uri(uri: str, port: int) -> str:
    """uri (a socket URI of the embedded server) as a TCP URI to 127.0.0.1:port, login and database kept,
    accepting SCRAM only (module docstring)."""
    parts = urlsplit(uri)
    login = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    query = "&".join(
        item for item in parts.query.split("&") if item and not item.startswith(("host=", "port="))
    )
    return urlunsplit(
        (parts.scheme, f"{login}{TCP_HOST}:{int(port)}", parts.path, _scram_only(query), parts.fragment)
    )


def _scram_only(query: str) -> str:
    """A URI query that also asks libpq for SCRAM authentication and nothing else."""
    items = [item for item in query.split("&") if item and not item.startswith("require_auth=")]
    return "&".join([*items, SCRAM_ONLY])


def ensure_running(home: Path, tcp_port: int | None = None) -> str:
    """Start (or reuse) the embedded server for this home, secured; return the owner's libpq URI (over the
    socket). A server this call starts also listens on 127.0.0.1:tcp_port, when given and free; a running
    server is never restarted for a port (module docstring)."""
    pgdata = pgdata_dir(home)
    uri = _running_uri(pgdata) if pgdata.exists() else None
    started = uri is None
    if uri is None:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        import pgserver
        from pgserver.postgres_server import PostgresServer

        logger.info("starting the embedded PostgreSQL under %s", pgdata)
        # pgserver keeps one handle per data directory for the life of the process and hands it out again
        # without starting anything: a handle to a server that stopped since (a crash, `db stop`) must go,
        # or a long-running process (the API) could never start it again.
        PostgresServer._instances.pop(pgdata.expanduser().resolve(), None)
        # cleanup_mode=None: the server outlives this process, so every command shares one server.
        uri = pgserver.get_server(pgdata, cleanup_mode=None).get_uri()
    secure_home(home)
    if not _hba_secured(pgdata):
        _secure(home, pgdata, uri)
    password = passwords.read_secret(passwords.owner_password_path(home))
    if password is None:
        raise EmbeddedAuthError(
            f"the embedded server under {pgdata} requires a password and "
            f"{passwords.owner_password_path(home)} is missing: restore that file (mode 0600) from a backup "
            "of this STRATAFLOW_HOME"
        )
    owner_uri = with_login(uri, OWNER, password)
    if started:  # a home secured before SERVER_SETTINGS_MB existed gets them when this code first starts it
        with _home_lock(home):
            _apply_settings(pgdata, owner_uri)
    if tcp_port is not None and _listening(pgdata) != (tcp_port, TCP_HOST):
        if started:
            listen_tcp(home, tcp_port)
            uri = _running_uri(pgdata) or uri  # the socket's port follows the TCP port
            owner_uri = with_login(uri, OWNER, password)
        else:
            logger.info(
                "the embedded PostgreSQL under %s runs without 127.0.0.1:%d (STRATAFLOW_DB_PORT); it serves "
                "other processes and is not restarted for a port: `strataflow db stop` to change it",
                pgdata, tcp_port,
            )  # fmt: skip
    return owner_uri


def secure_home(home: Path) -> None:
    """The home's mode: 0700, or 0711 when the server runs as another user (root: the 'pgserver' user)."""
    serves_as_other_user = os.name != "nt" and os.geteuid() == 0
    try:
        home.chmod(0o711 if serves_as_other_user else 0o700)
    except OSError as exc:  # a home this user does not own: say so, do not stop
        logger.warning("could not make %s private: %s", home, exc)


def _apply_settings(pgdata: Path, owner_uri: str) -> None:
    """Give the server SERVER_RELOAD_SETTINGS (a reload) and SERVER_SETTINGS_MB (a restart), unless it runs
    with them already."""
    import psycopg

    with psycopg.connect(owner_uri, autocommit=True) as conn:
        query = "select name, setting::bigint from pg_settings where name = any(%s)"
        names = [*SERVER_SETTINGS_MB, *SERVER_RELOAD_SETTINGS]
        current: dict[str, int] = {name: value for name, value in conn.execute(query, [names])}
        reload = {name: value for name, value in SERVER_RELOAD_SETTINGS.items() if current.get(name) != value}
        for name, value in reload.items():
            conn.execute(f"alter system set {name} = {int(value)}")
        if reload:
            conn.execute("select pg_reload_conf()")
        if all(current.get(name) == mb * 1024 // PAGE_KB for name, mb in SERVER_SETTINGS_MB.items()):
            return
        for name, mb in SERVER_SETTINGS_MB.items():
            conn.execute(f"alter system set {name} = '{int(mb)}MB'")
    logger.info("restarting the embedded PostgreSQL under %s with %s", pgdata, SERVER_SETTINGS_MB)
    _fast_pg_ctl(pgdata, "restart", "-l", str(pgdata / "log"))
    secure_home(pgdata.parent)


def _fast_pg_ctl(pgdata: Path, action: str, *options: str) -> None:
    """A `pg_ctl -m fast` action (stop, restart) on pgdata, waited for; a failure raises with pg_ctl's error.
    A restart reuses the options the server was started with (pg_ctl keeps them)."""
    from pgserver._commands import POSTGRES_BIN_PATH

    command = [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(pgdata), "-w", "-m", "fast", *options, action]
    result = _run_as_server_user(command)
    if result.returncode != 0:
        raise RuntimeError(f"pg_ctl {action} failed for {pgdata}: {result.stderr.strip()}")


def with_login(uri: str, user: str, password: str, scram_only: bool = True) -> str:
    """uri with its user and password replaced (the host, database and query stay), accepting SCRAM only
    (scram_only=False: for the one step that secures a home whose server still trusts local logins)."""
    parts = urlsplit(uri)
    host = parts.netloc.rsplit("@", 1)[-1]
    netloc = f"{quote(user, safe='')}:{quote(password, safe='')}@{host}"
    query = _scram_only(parts.query) if scram_only else parts.query
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _hba_path(pgdata: Path) -> Path:
    return pgdata / "pg_hba.conf"


def _hba_secured(pgdata: Path) -> bool:
    try:
        return _hba_path(pgdata).read_text(encoding="utf-8").startswith(HBA_MARKER)
    except FileNotFoundError:
        return False


@contextmanager
def _home_lock(home: Path) -> Iterator[None]:
    """One process at a time secures a home (an exclusive lock on a file under its secrets directory)."""
    directory = passwords.secrets_dir(home)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    directory.chmod(0o700)
    fd = os.open(directory / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _secure(home: Path, pgdata: Path, uri: str) -> None:
    """Passwords for the owner and every login role, then scram-sha-256 in pg_hba.conf (once per home)."""
    import psycopg

    with _home_lock(home):
        if _hba_secured(pgdata):
            return
        owner_path = passwords.owner_password_path(home)
        owner_password = passwords.read_secret(owner_path) or passwords.generate_password()
        passwords.write_secret(owner_path, owner_password)
        logger.info("securing the embedded server under %s: passwords and scram-sha-256", pgdata)
        # Trusted, the password is not asked for (so no SCRAM either, which a SCRAM-only URL would refuse); a
        # server already asking for it gets the stored one.
        with psycopg.connect(
            with_login(uri, OWNER, owner_password, scram_only=False), autocommit=True
        ) as conn:
            passwords.set_password(conn, OWNER, owner_password)
            for (role,) in conn.execute(SELECT_ROLES_WITHOUT_PASSWORD).fetchall():
                if not passwords.ROLE_FILE_NAME.match(role):
                    logger.warning("login role %r has an unusual name and gets no stored password", role)
                    continue
                password = passwords.role_password(home, role) or passwords.generate_password()
                passwords.store_role_password(home, role, password)
                passwords.set_password(conn, role, password)
        # Before pg_hba.conf is secured, every other process waits for this lock: a restart drops nobody.
        _apply_settings(pgdata, with_login(uri, OWNER, owner_password, scram_only=False))
        _write_hba(pgdata)
        with psycopg.connect(
            with_login(uri, OWNER, owner_password, scram_only=False), autocommit=True
        ) as conn:
            conn.execute("select pg_reload_conf()")


def rotate_owner_password(home: Path) -> None:
    """Give the owner a new generated password: set on the server first, then kept in the home. Open
    connections stay; a process that read the old password before the change must reconnect."""
    import psycopg

    uri = ensure_running(home)
    with _home_lock(home), psycopg.connect(uri, autocommit=True) as conn:
        password = passwords.generate_password()
        passwords.set_password(conn, OWNER, password)
        passwords.write_secret(passwords.owner_password_path(home), password)


def _write_hba(pgdata: Path) -> None:
    """Replace pg_hba.conf, keeping its owner and mode (the server runs as another user when we are root)."""
    path = _hba_path(pgdata)
    info = path.stat()
    tmp = path.with_name("pg_hba.conf.strataflow.tmp")
    tmp.write_text(HBA_RULES, encoding="utf-8")
    os.chmod(tmp, info.st_mode & 0o777)
    if os.name != "nt" and os.geteuid() == 0:
        os.chown(tmp, info.st_uid, info.st_gid)
    os.replace(tmp, path)


def is_running(home: Path) -> bool:
    """Whether the home's server runs (or is starting: its postmaster.pid is still being written)."""
    pgdata = pgdata_dir(home)
    try:
        return pgdata.exists() and _running_uri(pgdata) is not None
    except AssertionError:  # pgserver reads a postmaster.pid whose lines are not all written yet
        return True


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
    if not is_running(home):
        return False
    _fast_pg_ctl(pgdata_dir(home), "stop")
    return True


def backup(uri: str, out: Path) -> None:
    """Dump the database with the pg_dump bundled in the wheel (custom format, restore with pg_restore)."""
    from pgserver._commands import POSTGRES_BIN_PATH
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    out = out.resolve()
    # The password goes in the environment, not on the command line (which other local users can list).
    info = conninfo_to_dict(uri)
    password = info.pop("password", None)
    env = {**os.environ, **({"PGPASSWORD": str(password)} if password else {})}
    result = subprocess.run(
        [str(POSTGRES_BIN_PATH / "pg_dump"), "--format=custom", f"--file={out}", make_conninfo("", **info)],
        capture_output=True,
        text=True,
        env=env,
    )
    if result.returncode != 0:
        raise RuntimeError(f"pg_dump failed: {result.stderr.strip()}")
    out.chmod(0o600)  # the whole database: as private as the password files
