"""Database access: the connection URL (embedded or external) and one SQLAlchemy engine per URL."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, OperationalError

from strataflow.config import Settings
from strataflow.db import embedded

logger = logging.getLogger(__name__)

# Each process's pool (engine_for): small, since the embedded server allows 100 connections and many processes
# share it. Its connections are kept once opened (no overflow): an overflow connection is closed when it is
# given back, so an API worker running 3 scans at once opened and closed a server backend for many of its
# requests (a fork, the login, the vector type lookup and cold catalog caches each time: issue 49).
POOL_SIZE = 4
MAX_OVERFLOW = 0


class DatabaseError(RuntimeError):
    """The database cannot be used as configured; the message says what to do."""


class WorkDeadline(RuntimeError):
    """The work of one request ran past its deadline (work_deadline): refused at its next statement."""


# The deadline (time.monotonic) of the work the current request does, or None. A context variable: the API
# sets it around a heavy request, and the threads running the request's code inherit it.
DEADLINE: ContextVar[tuple[float, str] | None] = ContextVar("strataflow_work_deadline", default=None)


@contextmanager
def work_deadline(seconds: float | None, what: str = "") -> Iterator[None]:
    """Bound the database work done inside (in this context and the threads it starts) to `seconds`: every
    statement after the deadline raises WorkDeadline, and a session opened inside gets a statement_timeout
    of the time left (deadline_ms). `what` names the setting, for the message. None: no deadline inside,
    whatever the context holds (asyncio can carry a context variable from one task into the next one a
    connection starts: CPython issue 140947)."""
    token = DEADLINE.set(None if seconds is None else (time.monotonic() + seconds, what))
    try:
        yield
    finally:
        DEADLINE.reset(token)


def deadline_ms() -> int | None:
    """Milliseconds left of the current deadline (at least 1), or None when there is none."""
    deadline = DEADLINE.get()
    return None if deadline is None else max(1, int((deadline[0] - time.monotonic()) * 1000))


def _check_deadline(*_: object) -> None:
    deadline = DEADLINE.get()
    if deadline is not None and time.monotonic() > deadline[0]:
        raise WorkDeadline(
            f"this request's work ran past its time limit ({deadline[1]}): ask for less at once "
            "(a shorter text or query, fewer filter values, ops or messages) or split it"
        )


def libpq_url(settings: Settings) -> str:
    """A postgresql:// URI (what psql and BI tools take), starting the embedded server when needed; for the
    embedded server it logs in as the owner with the password kept in STRATAFLOW_HOME."""
    if settings.database_url is not None:
        url = settings.database_url.get_secret_value()
        return re.sub(r"^postgres(ql)?(\+\w+)?://", "postgresql://", url)
    return embedded.ensure_running(settings.home, settings.db_port)


def role_libpq_url(settings: Settings, role: str) -> str:
    """The libpq URI that logs in as a strataflow role, with the password kept in STRATAFLOW_HOME."""
    from strataflow.db import passwords
    from strataflow.db.roles import AccessError, check_role_name, role_url

    password = passwords.role_password(settings.home, check_role_name(role))
    if password is None:
        raise AccessError(
            f"no stored password for role {role!r} under {settings.home}: create the role with `strataflow "
            f"access create-role {role} --kind agent`, or give it a new one with `strataflow access "
            f"rotate-password {role}`"
        )
    url = role_url(libpq_url(settings), role, password)
    if settings.database_url is None and settings.db_port is not None:
        listening = embedded.listening_port(settings.home)
        if listening != settings.db_port:  # another process may hold that port: never point a role at it
            where = f"127.0.0.1:{listening}" if listening else "its Unix socket only"
            raise AccessError(
                f"the embedded server under {settings.home} listens on {where}, not 127.0.0.1:"
                f"{settings.db_port} (STRATAFLOW_DB_PORT): it takes the port when it starts, and only when "
                "no other process holds it; free the port, run `strataflow db stop`, then this command again"
            )
        url = embedded.tcp_uri(url, settings.db_port)  # what a BI tool on this machine connects to
    return with_timezone(url, settings.timezone)


def with_timezone(url: str, zone: str) -> str:
    """url whose sessions use the time zone `zone` (libpq's options parameter: days and ISO weeks in a role's
    own queries match the marts and views strataflow builds in STRATAFLOW_TIMEZONE)."""
    if "options=" in url:
        return url
    option = "options=" + quote(f"-c TimeZone={zone}", safe="")
    return url + ("&" if "?" in url else "?") + option


def sqlalchemy_url(url: str) -> str:
    """The psycopg 3 dialect URL for a libpq URI."""
    return re.sub(r"^postgres(ql)?(\+\w+)?://", "postgresql+psycopg://", url)


def engine_for(settings: Settings) -> Engine:
    """The process-wide engine for these settings (one per URL), with pgvector types registered."""
    url = sqlalchemy_url(libpq_url(settings))
    key = (url, settings.timezone)
    if key not in _ENGINES:
        _ENGINES[key] = _create_engine(url, settings.timezone)
    return _ENGINES[key]


def ledger_engine_for(settings: Settings) -> Engine:
    """The process-wide engine of the LLM gateway's bookkeeping (the llm_calls ledger and llm_cache): its own
    small pool, separate from engine_for's. A request or a stage holds a connection of engine_for's pool while
    it calls the model; the gateway's reads and writes around the call take a connection of this pool for a
    few milliseconds and wait for nothing else, so concurrent callers can never deadlock on one pool (four
    concurrent save_info calls used to exhaust pool_size + max_overflow and wait 30 s). A ledger row commits
    on its own, so it survives the caller's rollback."""
    url = sqlalchemy_url(libpq_url(settings))
    key = (url, settings.timezone, "ledger")
    if key not in _ENGINES:
        _ENGINES[key] = _create_engine(url, settings.timezone, pool_size=1, max_overflow=2)
    return _ENGINES[key]


_ENGINES: dict[tuple[str, ...], Engine] = {}


def _create_engine(
    url: str, timezone: str, pool_size: int = POOL_SIZE, max_overflow: int = MAX_OVERFLOW
) -> Engine:
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise DatabaseError(f"DATABASE_URL is not a database URL: {exc}") from None
    if not parsed.drivername.startswith("postgresql"):
        raise DatabaseError(
            f"DATABASE_URL must point at PostgreSQL (postgresql://user:pass@host/db), not {parsed.drivername}"
        )
    # hide_parameters: an error's text (logged, or shown) never carries the statement's parameters, which
    # hold user text (messages, memories, queries).
    engine = create_engine(
        url, pool_size=pool_size, max_overflow=max_overflow, pool_pre_ping=True, hide_parameters=True
    )

    event.listen(engine, "before_cursor_execute", _check_deadline)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):
        with dbapi_conn.cursor() as cur:
            # Session time zone = STRATAFLOW_TIMEZONE, so current_date, date_trunc and ::date agree with it.
            cur.execute("select set_config('TimeZone', %s, false)", (timezone,))
            cur.execute("select 1 from pg_type where typname = 'vector'")
            has_vector = cur.fetchone() is not None
        dbapi_conn.commit()
        if has_vector:  # before `db upgrade` creates the extension there is nothing to register
            from pgvector.psycopg import register_vector

            register_vector(dbapi_conn)

    return engine


def check_connection(settings: Settings) -> None:
    """Connect once, turning a refused or unknown server into a message that says what to check."""
    engine = engine_for(settings)
    try:
        with engine.connect() as conn:
            conn.execute(text("select 1"))
    except OperationalError as exc:
        where = engine.url.render_as_string(hide_password=True)
        reason = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        raise DatabaseError(
            f"cannot connect to PostgreSQL at {where}: {reason}. Check DATABASE_URL, or unset it to use the "
            "embedded server."
        ) from None


def dispose_engines() -> None:
    """Close every pooled connection (tests, and before forking)."""
    for engine in _ENGINES.values():
        engine.dispose()
    _ENGINES.clear()
