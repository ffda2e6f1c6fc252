"""A multi-process API server gives each worker a listening socket of its own on the same port
(strataflow.service.server.WorkerSocket), so that the kernel spreads new connections over the workers
instead of waking the one that last waited (which took every connection of 8 keep-alive clients)."""

from __future__ import annotations

import socket
from multiprocessing.reduction import ForkingPickler

from strataflow.service.server import WorkerSocket, _TcpConfig


def test_a_worker_gets_a_socket_of_its_own_on_the_parents_port() -> None:
    config = _TcpConfig(
        "strataflow.service.app:create_app", factory=True, host="127.0.0.1", port=0, workers=2
    )
    parent = config.bind_socket()
    try:
        assert isinstance(parent, WorkerSocket)
        port = parent.getsockname()[1]
        # What a spawned worker unpickles (multiprocessing's pickler, as uvicorn passes the sockets).
        workers = [ForkingPickler.loads(bytes(ForkingPickler.dumps(parent))) for _ in range(2)]
        for worker in workers:
            assert type(worker) is socket.socket and worker.fileno() != parent.fileno()
            assert worker.getsockname() == ("127.0.0.1", port)
            assert worker.getsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT) == 1
            assert worker.proto == socket.IPPROTO_TCP  # asyncio sets TCP_NODELAY only then
            worker.listen(64)
            worker.settimeout(5)
        accepted = []
        clients = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(16)]
        for worker in workers:  # every connection is in one of the two accept queues
            worker.setblocking(False)
            while True:
                try:
                    accepted.append(worker.accept()[0])
                except BlockingIOError:
                    break
        assert len(accepted) == 16
        for sock in [*accepted, *clients, *workers]:
            sock.close()
    finally:
        parent.close()
