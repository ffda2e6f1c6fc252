"""Run the API with uvicorn: one process, or `workers` processes, each listening on the same port.

Workers: on a shared listening socket (uvicorn's way) the kernel wakes the worker that last waited, whose
event loop then accepts every connection waiting: 8 keep-alive clients connecting at once all went to one of
two workers in 2 of 3 tries, which left a core idle. Where the platform has SO_REUSEPORT (Linux), each
worker listens on a socket of its own bound to the same address (WorkerSocket: the parent binds one to hold
the port and never listens on it) and the kernel spreads new connections over the workers by address hash;
a worker holding more than its share of the open connections closes one after its next answer, so that the
client reconnects (strataflow.service.balance).

uvicorn binds the shared socket of a multi-process server as `socket.socket(AF_INET)`, whose protocol
number is 0; asyncio turns Nagle's algorithm off (TCP_NODELAY) only on sockets that say IPPROTO_TCP, so
every response would wait ~40 ms for the client's delayed ACK. The socket is bound here with IPPROTO_TCP.
SIGTERM or SIGINT: uvicorn stops accepting, lets running requests finish (up to 30 s), runs the app's
shutdown (the connection pool closes) and exits.

Slow or idle clients cannot hold the server: a connection that has not sent a whole request head (request
line and headers) within STRATAFLOW_API_HEADER_TIMEOUT_S is closed (before its first request and between
keep-alive requests); a request whose body has not all arrived within STRATAFLOW_API_BODY_TIMEOUT_S of its
head is closed; a client that does not read its answers (the server's send buffer stays full) for
STRATAFLOW_API_SEND_TIMEOUT_S is reset (its unsent bytes dropped, nothing left in the kernel), and each
connection's send buffer is SEND_BUFFER_BYTES, so a client that never reads costs the server little work
before it waits; a process holds at most STRATAFLOW_API_MAX_CONNECTIONS connections, and at most
STRATAFLOW_API_MAX_CONNECTIONS_PER_ADDRESS of one client address (more are closed at once, unanswered: a
flood gets nothing to read), so one address cannot take the others'. When the process is full, a new
connection from an address holding fewer connections than the busiest address takes the place of one of
that address's connections (one that is not reading first, then one idle, then the oldest): many addresses
together cannot lock another address out; only when no address holds more is the newcomer answered 503. A
keep-alive connection idles at most STRATAFLOW_API_KEEP_ALIVE_S and makes at most
STRATAFLOW_API_KEEP_ALIVE_REQUESTS requests.

GuardedH11Protocol extends uvicorn's h11 protocol (an internal class: pyproject.toml pins uvicorn below the
next minor release, and tests/service/test_connection_limits.py checks the methods it relies on).

X-Forwarded-For is read only from STRATAFLOW_API_TRUSTED_PROXIES (uvicorn_options). The workers share one
rate-limit file under STRATAFLOW_HOME/run (mode 0600, removed at exit), so the configured rate holds for
the server as a whole; a single process keeps its buckets in memory.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import struct
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState
from uvicorn.supervisors import Multiprocess

from strataflow.config import Settings, load_settings
from strataflow.service.balance import ConnectionShare

APP = "strataflow.service.app:create_app"
SHARED_FILES = {"STRATAFLOW_API_RATE_FILE": ".rate", "STRATAFLOW_API_BALANCE_FILE": ".connections"}
GRACEFUL_SHUTDOWN_S = 30
HEAD_MAX_BYTES = 16 * 1024  # request line and headers
# The kernel's send buffer of one connection (Linux doubles the value given). Left to autotuning, loopback
# takes up to 4 MB per connection: a client that never reads made the server render that much before its
# writes paused, for each of its connections. Answers are small JSON: this keeps a fast link full.
SEND_BUFFER_BYTES = 128 * 1024
BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"retry-after: 1\r\ncontent-length: 97\r\n\r\n"
    b'{"error": {"code": "unavailable", "message": "too many open connections; retry", "field": null}}\n'
)


@dataclass(frozen=True)
class ConnectionLimits:
    """The bounds GuardedH11Protocol holds a connection to (STRATAFLOW_API_* settings)."""

    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    send_timeout_s: float = 10.0
    max_connections: int = 1000
    max_per_address: int = 100
    max_requests: int = 1000  # per keep-alive connection
    trusted: frozenset[str] = frozenset()  # proxy addresses, exempt from the per-address cap

    @classmethod
    def of(cls, settings: Settings) -> ConnectionLimits:
        return cls(
            settings.api_header_timeout_s, settings.api_body_timeout_s, settings.api_send_timeout_s,
            settings.api_max_connections, settings.api_max_connections_per_address,
            settings.api_keep_alive_requests, frozenset(settings.api_trusted_proxies),
        )  # fmt: skip


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header-read, a body-read and a send timeout, a small send buffer, a
    connection cap per process and per client address (the process's shared fairly among addresses), and a
    bound on the requests of one keep-alive connection (module docstring). The bounds are a class
    attribute, set from the settings by configure() in each worker (create_app does)."""

    limits = ConnectionLimits()
    share: ConnectionShare | None = None  # the workers' connection counts (balance.py); None: one process
    leaving = 0  # connections of this process answered with `Connection: close` to move to another worker

    @classmethod
    def configure(cls, limits: ConnectionLimits, share: ConnectionShare | None = None) -> None:
        cls.limits, cls.share, cls.leaving = limits, share, 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._send_timer: asyncio.TimerHandle | None = None
        self._address: str | None = None  # in the per-address table while open
        self._requests = 0
        self._leaving = False  # counted in `leaving`

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
        limits = self.limits
        address = self.client[0] if self.client else None
        mine: list[GuardedH11Protocol] = []
        if address is not None and address not in limits.trusted:
            mine = _open_by_address(self.server_state).setdefault(address, [])
            mine.append(self)
            self._address = address
        if len(mine) > limits.max_per_address:  # a flood from one address: closed at once, no answer to read
            self.drop()
            return
        if len(self.connections) > limits.max_connections and not self._make_room(len(mine)):
            transport.write(BUSY)
            transport.close()
            return
        self._publish()
        self._arm_head()

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and self.conn.our_state in (h11.IDLE, h11.DONE):
            self._arm_head()  # the head of a next request (keep-alive) gets the same bound
        super().data_received(data)

    def handle_events(self) -> None:
        cycle = self.cycle
        super().handle_events()
        if self.cycle is not cycle and self.cycle is not None:
            self._requests += 1
            if self._requests >= self.limits.max_requests:
                self._close_after_response()
            elif self.share is not None and not self._leaving and self.share.over_share(self._held()):
                self._close_after_response()  # the client reconnects, perhaps to another worker
                self._leaving = True
                type(self).leaving += 1
                self._publish()
        reading_body = self.conn.their_state is h11.SEND_BODY
        if self.conn.their_state is not h11.IDLE and self._head_timer is not None:
            self._head_timer.cancel()  # the whole head has arrived
            self._head_timer = None
        if reading_body and self._body_timer is None:
            self._body_timer = self.loop.call_later(self.limits.body_timeout_s, self._body_timeout)
        elif not reading_body and self._body_timer is not None:
            self._body_timer.cancel()  # the whole body has arrived
            self._body_timer = None

    def pause_writing(self) -> None:
        """The send buffer is full: the client has that long to read before it is reset."""
        super().pause_writing()
        if self._send_timer is None:
            self._send_timer = self.loop.call_later(self.limits.send_timeout_s, self._send_timeout)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._send_timer is not None:
            self._send_timer.cancel()
            self._send_timer = None

    def connection_lost(self, exc: Exception | None) -> None:
        for timer in (self._head_timer, self._body_timer, self._send_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._body_timer = self._send_timer = None
        if self._address is not None:
            table = _open_by_address(self.server_state)
            mine = table.get(self._address, [])
            if self in mine:
                mine.remove(self)
            if not mine:
                table.pop(self._address, None)
            self._address = None
        super().connection_lost(exc)
        if self._leaving:
            self._leaving = False
            type(self).leaving -= 1
        self._publish()

    def _close_after_response(self) -> None:
        """Close once the current response is sent, saying so in it (`Connection: close`), so the client
        opens a new connection for its next request instead of finding this one gone."""
        assert self.cycle is not None
        self.cycle.keep_alive = False
        self.cycle.default_headers = [*self.cycle.default_headers, (b"connection", b"close")]

    def _held(self) -> int:
        """This process's connections, those it is closing to move them not counted."""
        return len(self.connections) - self.leaving

    def _publish(self) -> None:
        if self.share is not None:
            self.share.publish(self._held())

    def drop(self) -> None:
        """Close now, with a reset: what is buffered for a client that does not read is dropped, so the
        kernel keeps nothing of the connection either (a plain close would wait to send it)."""
        sock = self.transport.get_extra_info("socket")
        if sock is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass
        self.transport.abort()

    def _make_room(self, held: int) -> bool:
        """The process is full: take the place of a connection of the busiest address, when it holds more
        than this connection's address does (with this one); False when no address holds more."""
        table = _open_by_address(self.server_state)
        busiest = max(table.items(), key=lambda item: len(item[1]), default=(None, []))[1]
        if len(busiest) <= max(held, 1):
            return False
        victim = min(busiest, key=lambda p: (not p.flow.write_paused, p.cycle is not None, busiest.index(p)))
        victim.drop()
        return True

    def _arm_head(self) -> None:
        self._head_timer = self.loop.call_later(self.limits.header_timeout_s, self._head_timeout)

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self.conn.their_state in (h11.IDLE, h11.DONE) or self.conn.their_state is h11.MUST_CLOSE:
            self._close()

    def _body_timeout(self) -> None:
        """The body did not arrive in time: the connection is closed (the app waiting for the body sees the
        client gone). No answer is written: a client that stalls is not reading one, and unread bytes would
        keep its side of the connection open."""
        self._body_timer = None
        if self.conn.their_state is h11.SEND_BODY:
            self._close()

    def _send_timeout(self) -> None:
        """The client read nothing of its answers for send_timeout_s: reset (it holds a worker otherwise)."""
        self._send_timer = None
        if self.flow is not None and self.flow.write_paused:
            self.drop()

    def _close(self) -> None:
        """Close: gracefully when nothing waits to be sent, else with a reset (drop)."""
        if self.transport.get_write_buffer_size():
            self.drop()
        else:
            self.transport.close()


def _open_by_address(state: ServerState) -> dict[str, list[GuardedH11Protocol]]:
    """Open connections per client address of one server, oldest first (on uvicorn's per-server state)."""
    table: dict[str, list[GuardedH11Protocol]] | None = getattr(state, "strataflow_by_address", None)
    if table is None:
        table = {}
        state.strataflow_by_address = table  # type: ignore[attr-defined]
    return table


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """The uvicorn options of the service's bounds: the guarded protocol, keep-alive, the head's size, and
    X-Forwarded-For believed only from STRATAFLOW_API_TRUSTED_PROXIES (uvicorn trusts 127.0.0.1 by default:
    any local process could then pick the client address the rate limit and the caps see)."""
    proxies = list(settings.api_trusted_proxies)
    return {
        "http": GuardedH11Protocol,
        "server_header": False,
        "timeout_keep_alive": settings.api_keep_alive_s,
        "h11_max_incomplete_event_size": HEAD_MAX_BYTES,
        "proxy_headers": bool(proxies),
        "forwarded_allow_ips": proxies or None,
        "reset_contextvars": True,  # a request's context variables never reach the connection's next one
    }


class WorkerSocket(socket.socket):
    """The parent's socket of a multi-process server, bound with SO_REUSEPORT. A worker process that receives
    it (pickled to the spawned worker) gets a new socket bound to the same address instead of a copy of this
    one, so each worker has its own accept queue (module docstring)."""

    def __reduce__(self) -> tuple[Any, ...]:
        host, port = self.getsockname()[:2]
        return (bound_socket, (self.family, host, port))


def bound_socket(
    family: int, host: str, port: int, cls: type[socket.socket] = socket.socket
) -> socket.socket:
    """A TCP socket bound to (host, port) with SO_REUSEADDR and SO_REUSEPORT (not listening yet)."""
    sock = cls(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


class _TcpConfig(uvicorn.Config):
    def bind_socket(self) -> socket.socket:
        if self.workers > 1 and self.uds is None and self.fd is None and hasattr(socket, "SO_REUSEPORT"):
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            try:
                sock = bound_socket(family, self.host, self.port, WorkerSocket)
            except OSError as exc:
                logging.getLogger("uvicorn.error").error(exc)
                sys.exit(3)
            logging.getLogger("uvicorn.error").info(
                "Uvicorn running on http://%s:%d (%d workers, a socket each)",
                self.host, sock.getsockname()[1], self.workers,
            )  # fmt: skip
            sock.set_inheritable(True)
            return sock
        sock = super().bind_socket()
        if sock.family not in (socket.AF_INET, socket.AF_INET6) or sock.proto == socket.IPPROTO_TCP:
            return sock
        tcp = socket.socket(sock.family, sock.type, socket.IPPROTO_TCP, fileno=os.dup(sock.fileno()))
        sock.close()
        tcp.set_inheritable(True)
        return tcp


def serve(host: str, port: int, workers: int) -> None:
    """Serve until a signal stops it; exit 3 when the app could not start (as uvicorn.run does)."""
    settings = load_settings()
    run_dir = settings.home / "run"
    run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    files = []
    # The workers share their rate-limit buckets and connection counts in these files. One process keeps
    # them in memory: it has no one to share them with, and uvicorn ends it on SIGTERM by raising the signal
    # again once it has stopped, so the `finally` below would never remove its files.
    for variable, suffix in SHARED_FILES.items():
        if workers > 1:
            fd, path = tempfile.mkstemp(prefix=f"api-{port}-", suffix=suffix, dir=run_dir)
            os.close(fd)  # mkstemp made it 0600
            os.environ[variable] = path  # the workers' settings read it
            files.append(Path(path))
    config = _TcpConfig(
        APP, factory=True, host=host, port=port, workers=workers, log_level="info",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S, **uvicorn_options(settings),
    )  # fmt: skip
    server = uvicorn.Server(config)
    try:
        if workers > 1:
            Multiprocess(config, sockets=[config.bind_socket()]).run()
        else:
            server.run()
    except KeyboardInterrupt:
        pass
    finally:
        for file in files:
            file.unlink(missing_ok=True)
    if workers == 1 and not server.started:
        sys.exit(3)
