"""Run the API with uvicorn: one process, or `workers` processes sharing one listening socket.

uvicorn binds the shared socket of a multi-process server as `socket.socket(AF_INET)`, whose protocol
number is 0; asyncio turns Nagle's algorithm off (TCP_NODELAY) only on sockets that say IPPROTO_TCP, so
every response would wait ~40 ms for the client's delayed ACK. The socket is bound here with IPPROTO_TCP.
SIGTERM or SIGINT: uvicorn stops accepting, lets running requests finish (up to 30 s), runs the app's
shutdown (the connection pool closes) and exits.

Slow or idle clients cannot hold the server: a connection that has not sent a whole request head (request
line and headers) within STRATAFLOW_API_HEADER_TIMEOUT_S is closed (before its first request and between
keep-alive requests), and a process holds at most STRATAFLOW_API_MAX_CONNECTIONS connections (more are
answered 503 and closed at once). The workers share one rate-limit file under STRATAFLOW_HOME/run (mode
0600, removed at exit), so the configured rate holds for the server as a whole.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.supervisors import Multiprocess

from strataflow.config import load_settings

APP = "strataflow.service.app:create_app"
GRACEFUL_SHUTDOWN_S = 30
BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"retry-after: 1\r\ncontent-length: 97\r\n\r\n"
    b'{"error": {"code": "unavailable", "message": "too many open connections; retry", "field": null}}\n'
)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header-read timeout and a connection cap (module docstring). The bounds
    are class attributes, set from the settings by configure() in each worker (create_app calls it)."""

    header_timeout_s = 10.0
    max_connections = 1000

    @classmethod
    def configure(cls, header_timeout_s: float, max_connections: int) -> None:
        cls.header_timeout_s, cls.max_connections = header_timeout_s, max_connections

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            transport.write(BUSY)
            transport.close()
            return
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._head_timer is None and self.conn.our_state in (h11.IDLE, h11.DONE):
            self._arm()  # the head of a next request (keep-alive) gets the same bound
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        if self.conn.their_state is not h11.IDLE and self._head_timer is not None:
            self._head_timer.cancel()  # the whole head has arrived
            self._head_timer = None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_timeout)

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self.conn.their_state in (h11.IDLE, h11.DONE) or self.conn.their_state is h11.MUST_CLOSE:
            self.transport.close()


class _TcpConfig(uvicorn.Config):
    def bind_socket(self) -> socket.socket:
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
    fd, rate_file = tempfile.mkstemp(prefix=f"api-{port}-", suffix=".rate", dir=run_dir)
    os.close(fd)  # mkstemp made it 0600
    os.environ["STRATAFLOW_API_RATE_FILE"] = rate_file  # the workers' settings read it
    config = _TcpConfig(
        APP, factory=True, host=host, port=port, workers=workers, log_level="info",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S, server_header=False,
        http=GuardedH11Protocol,
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
        Path(rate_file).unlink(missing_ok=True)
    if workers == 1 and not server.started:
        sys.exit(3)
