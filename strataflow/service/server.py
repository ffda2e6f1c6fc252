"""Run the API with uvicorn: one process, or `workers` processes sharing one listening socket.

uvicorn binds the shared socket of a multi-process server as `socket.socket(AF_INET)`, whose protocol
number is 0; asyncio turns Nagle's algorithm off (TCP_NODELAY) only on sockets that say IPPROTO_TCP, so
every response would wait ~40 ms for the client's delayed ACK. The socket is bound here with IPPROTO_TCP.
SIGTERM or SIGINT: uvicorn stops accepting, lets running requests finish (up to 30 s), runs the app's
shutdown (the connection pool closes) and exits.
"""

from __future__ import annotations

import os
import socket
import sys

import uvicorn
from uvicorn.supervisors import Multiprocess

APP = "strataflow.service.app:create_app"
GRACEFUL_SHUTDOWN_S = 30


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
    config = _TcpConfig(
        APP, factory=True, host=host, port=port, workers=workers, log_level="info",
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S, server_header=False,
    )  # fmt: skip
    server = uvicorn.Server(config)
    try:
        if workers > 1:
            Multiprocess(config, sockets=[config.bind_socket()]).run()
        else:
            server.run()
    except KeyboardInterrupt:
        pass
    if workers == 1 and not server.started:
        sys.exit(3)
