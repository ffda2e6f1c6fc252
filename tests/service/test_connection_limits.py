"""Connections that cannot hold the server (issue 36 item 2), on real uvicorn servers with the service's
protocol and small bounds: a body that stalls is closed (nothing left to read: the check of issue 36 counts
a connection with unread bytes as open); one client address cannot take the connections of another
(127.0.0.2 is served while 127.0.0.1 holds stalled bodies over its cap); a keep-alive connection ends after
its requests; X-Forwarded-For is believed only from a configured proxy; a client that never reads its
answers is reset after the send timeout (issue 46, R1), and addresses that fill the process together leave a
new address served."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from strataflow.config import Settings
from strataflow.service.balance import ConnectionShare
from strataflow.service.server import ConnectionLimits, GuardedH11Protocol, uvicorn_options


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


BIG = b"x" * 200_000  # the answer of GET /big


async def _echo_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Reads the whole body, answers the client address uvicorn saw (GET /big: 200 KB)."""
    if scope["type"] != "http":
        return
    while True:
        message = await receive()
        if message["type"] == "http.disconnect" or not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": []})
    body = BIG if scope["path"] == "/big" else scope["client"][0].encode()
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
def serve(settings: Settings) -> Iterator[Any]:
    """Start a server with these limits (and settings' uvicorn options); yields its base URL."""
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []
    before = GuardedH11Protocol.limits

    def start(limits: ConnectionLimits, share: ConnectionShare | None = None, **changes: Any) -> str:
        GuardedH11Protocol.configure(limits, share)
        options = uvicorn_options(settings.model_copy(update=changes))
        port = _port()
        config = uvicorn.Config(_echo_app, host="127.0.0.1", port=port, log_level="warning", lifespan="off",
                                **options)  # fmt: skip
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
            time.sleep(0.05)
        servers.append((server, thread))
        return f"http://127.0.0.1:{port}"

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(30)
    GuardedH11Protocol.configure(before)


def _stall(url: str, source: str = "127.0.0.1") -> socket.socket | None:
    """A connection that sends a request head and the first byte of a body it never finishes; None when the
    server reset it first (over its address's cap: closed at accept, before the connect or the head ended)."""
    host, port = url.removeprefix("http://").split(":")
    try:
        sock = socket.create_connection((host, int(port)), timeout=10, source_address=(source, 0))
        sock.sendall(b"POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n[")
    except (ConnectionResetError, BrokenPipeError):
        return None
    return sock


def _closed_with(sock: socket.socket | None, wait_s: float) -> bytes | None:
    """What the server sent before closing the connection within wait_s, or None when it is still open."""
    if sock is None:
        return b""
    sock.settimeout(wait_s)
    answer = b""
    try:
        while chunk := sock.recv(4096):
            answer += chunk
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return answer


def test_a_stalled_body_is_closed(serve: Any) -> None:
    url = serve(ConnectionLimits(body_timeout_s=1.0))
    started = time.monotonic()
    assert _closed_with(_stall(url), 5.0) == b""  # closed, with nothing to read
    assert time.monotonic() - started < 3.0
    assert httpx.post(url, content=b"[1]").status_code == 200  # a whole body is served as before


def test_stalled_bodies_of_one_address_leave_another_address_served(serve: Any) -> None:
    url = serve(ConnectionLimits(body_timeout_s=2.0, max_connections=40, max_per_address=10))
    started = time.monotonic()
    stalled = [_stall(url) for _ in range(30)]  # 10 held until their body timeout, 20 closed at once
    other = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=10)
    answer = other.get(url)
    assert answer.status_code == 200 and answer.text == "127.0.0.2"
    # margins for a busy 2-core CI machine (the server runs in this process): held ones close at about 2 s,
    # and without the body timeout none would close at all
    answers = [_closed_with(sock, 10.0) for sock in stalled]
    assert answers == [b""] * 30, "a stalled connection was still open (or answered) after its body timeout"
    assert time.monotonic() - started < 9.0
    assert httpx.get(url, timeout=10).text == "127.0.0.1"  # the address is served again once they are gone


def test_a_keep_alive_connection_ends_after_its_requests(serve: Any) -> None:
    url = serve(ConnectionLimits(max_requests=2))
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    for _ in range(2):
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        time.sleep(0.3)
    answer = _closed_with(sock, 3.0)  # both answered, then closed by the server, which says so in the last
    assert answer is not None and answer.count(b"HTTP/1.1 200") == 2, answer
    assert answer.lower().count(b"connection: close") == 1, answer


@pytest.mark.parametrize(("proxies", "seen"), [([], "127.0.0.1"), (["127.0.0.1"], "203.0.113.9")])
def test_x_forwarded_for_is_believed_only_from_a_trusted_proxy(
    serve: Any, proxies: list[str], seen: str
) -> None:
    url = serve(ConnectionLimits(), api_trusted_proxies=proxies)
    assert httpx.get(url, headers={"X-Forwarded-For": "203.0.113.9"}).text == seen


def test_trusted_proxies_are_read_from_a_list_or_commas() -> None:
    assert Settings(api_trusted_proxies="10.0.0.1, ::1").api_trusted_proxies == ["10.0.0.1", "::1"]
    with pytest.raises(ValueError, match="not an IP address"):
        Settings(api_trusted_proxies="proxy.local")


def _held(port: int, sources: set[str]) -> int:
    """Connections the server side still holds (ESTABLISHED) from these client addresses (/proc/net/tcp)."""
    wanted = {"".join(f"{int(x):02X}" for x in reversed(a.split("."))) for a in sources}
    count = 0
    with open("/proc/net/tcp") as table:
        for line in table.read().splitlines()[1:]:
            fields = line.split()
            local, remote, state = fields[1], fields[2], fields[3]
            if int(local.split(":")[1], 16) == port and remote.split(":")[0] in wanted and state == "01":
                count += 1
    return count


def test_clients_that_never_read_are_reset_and_another_address_is_served(serve: Any) -> None:
    """R1: connections that pipeline requests for large answers and never read them are reset once their
    send buffer has stayed full for the send timeout; meanwhile a client on another address is served."""
    url = serve(ConnectionLimits(send_timeout_s=1.0, max_per_address=50))
    port = int(url.rsplit(":", 1)[1])
    readers = []
    for _ in range(20):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.bind(("127.0.0.3", 0))
        sock.connect(("127.0.0.1", port))
        sock.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n" * 40)  # 8 MB of answers, never read
        readers.append(sock)
    other = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=5)
    assert other.get(url).text == "127.0.0.2"
    deadline = time.monotonic() + 15
    while _held(port, {"127.0.0.3"}) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _held(port, {"127.0.0.3"}) == 0, "a client that never read was still connected"
    for sock in readers:
        sock.close()
    assert other.get(url).text == "127.0.0.2"


def test_addresses_that_fill_the_process_together_leave_a_new_address_served(serve: Any) -> None:
    """R1: a process cap of 12 filled by three addresses (4 stalled bodies each, under their own cap): a
    connection from a fourth address takes the place of one of the busiest address's, and is served."""
    url = serve(ConnectionLimits(body_timeout_s=30.0, max_connections=12, max_per_address=5))
    stalled = [_stall(url, f"127.0.0.{10 + i % 3}") for i in range(12)]
    time.sleep(0.3)
    other = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=5)
    answer = other.get(url)
    assert answer.status_code == 200 and answer.text == "127.0.0.2"
    dropped = [sock for sock in stalled if _closed_with(sock, 0.2) is not None]
    assert len(dropped) == 1, f"{len(dropped)} stalled connections gave way to the new address (want 1)"
    for sock in stalled:
        if sock is not None:
            sock.close()


def test_the_uvicorn_protocol_still_has_what_the_guard_extends() -> None:
    """GuardedH11Protocol overrides and reads these members of uvicorn's internal h11 protocol (uvicorn is
    pinned below its next minor release; this fails first when a new release renames one)."""
    import inspect

    from uvicorn.protocols.http.flow_control import FlowControl
    from uvicorn.protocols.http.h11_impl import H11Protocol

    for name in ("connection_made", "data_received", "handle_events", "connection_lost", "pause_writing",
                 "resume_writing"):  # fmt: skip
        assert callable(getattr(H11Protocol, name, None)), name
    made = inspect.getsource(H11Protocol.__init__) + inspect.getsource(H11Protocol.connection_made)
    for attribute in ("self.flow", "self.cycle", "self.conn", "self.server_state", "self.connections",
                      "self.client", "self.transport", "self.loop"):  # fmt: skip
        assert attribute in made, attribute
    assert "self.write_paused" in inspect.getsource(FlowControl.__init__)


STAND_IN_WORKER = """
import sys
from pathlib import Path
from strataflow.service.balance import ConnectionShare
share = ConnectionShare(Path(sys.argv[1]))
for line in sys.stdin:  # each line: the connections this stand-in for another worker holds now
    share.publish(int(line))
    print("ok", flush=True)
"""


def _holds(worker: subprocess.Popen[str], connections: int) -> None:
    assert worker.stdin is not None and worker.stdout is not None
    worker.stdin.write(f"{connections}\n")
    worker.stdin.flush()
    assert worker.stdout.readline() == "ok\n"


def test_a_worker_over_its_share_of_connections_closes_one_after_its_answer(
    serve: Any, tmp_path: Path
) -> None:
    """Balancing (strataflow.service.balance): this process serves, stand-in processes are the other workers
    of the same server. A worker holding more than ceil(all connections / workers) answers a request with
    `Connection: close` and the client reconnects by itself; at its share it keeps the connection; a worker
    that is gone counts for nothing, whatever its slot still says."""
    path = tmp_path / "connections"
    other = _stand_in(path)
    _holds(other, 0)
    url = serve(ConnectionLimits(), ConnectionShare(path))
    with httpx.Client(base_url=url, timeout=10) as first, httpx.Client(base_url=url, timeout=10) as second:
        assert "connection" not in first.get("/").headers  # 1 connection over 2 workers: at its share
        assert second.get("/").headers["connection"] == "close"  # 2 here, none there: one moves
        assert second.get("/").status_code == 200  # on a new connection the client opened by itself
        _holds(other, 2)  # 2 here, 2 there
        answers = [client.get("/") for client in (first, second, first, second)]
        assert [a.headers.get("connection") for a in answers] == [None] * 4
        third = _stand_in(path)
        _holds(third, 0)
        _holds(other, 6)
        _gone(other)  # its slot still says 6: counted, this worker's share would be ceil(8 / 3) = 3
        assert first.get("/").headers["connection"] == "close"  # 2 here, 0 at the live third: one moves
        assert first.get("/").status_code == 200
        _gone(third)  # its slot still says 0: this worker serves alone, 2 is its share
        assert [c.get("/").headers.get("connection") for c in (first, second)] == [None, None]


def _stand_in(path: Path) -> subprocess.Popen[str]:
    """A process that takes a worker's slot in the shared file and publishes what it is told (_holds)."""
    return subprocess.Popen([sys.executable, "-c", STAND_IN_WORKER, str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)  # fmt: skip


def _gone(worker: subprocess.Popen[str]) -> None:
    assert worker.stdin is not None
    worker.stdin.close()
    assert worker.wait(10) == 0


PID_APP = """
import os
from pathlib import Path
from strataflow.service.balance import ConnectionShare
from strataflow.service.server import ConnectionLimits, GuardedH11Protocol


def create_app():
    GuardedH11Protocol.configure(ConnectionLimits(), ConnectionShare(Path(os.environ["BALANCE_FILE"])))

    async def app(scope, receive, send):  # answers the worker's process id
        if scope["type"] != "http":
            return
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": str(os.getpid()).encode()})

    return app
"""

MULTI_WORKER_SERVER = """
import sys
from uvicorn.supervisors import Multiprocess
from strataflow.config import load_settings
from strataflow.service.server import _TcpConfig, uvicorn_options

config = _TcpConfig("pid_app:create_app", factory=True, host="127.0.0.1", port=int(sys.argv[1]), workers=2,
                    log_level="warning", **uvicorn_options(load_settings()))
Multiprocess(config, sockets=[config.bind_socket()]).run()
"""


def test_keep_alive_clients_end_evenly_spread_over_the_workers(tmp_path: Path) -> None:
    """Two worker processes on SO_REUSEPORT sockets (as `strataflow api --workers 2`), eight keep-alive
    clients: however the address hash placed their connections, within a few requests each worker holds
    four (without balancing 6/2 and 7/1 splits stay for as long as the clients keep their connections)."""
    (tmp_path / "pid_app.py").write_text(PID_APP)
    port = _port()
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "BALANCE_FILE": str(tmp_path / "connections")}  # fmt: skip
    server = subprocess.Popen([sys.executable, "-c", MULTI_WORKER_SERVER, str(port)], env=env)
    clients = [httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) for _ in range(8)]
    try:
        deadline = time.monotonic() + 60
        while len({_answer_once(f"http://127.0.0.1:{port}") for _ in range(8)} - {None}) < 2:
            assert server.poll() is None and time.monotonic() < deadline, "the workers did not start"
            time.sleep(0.2)
        for _ in range(30):
            served_by = [_answer(client) for client in clients]
        assert sorted(Counter(served_by).values()) == [4, 4], served_by
        moved = [client.get("/").headers.get("connection") for client in clients]
        assert moved == [None] * 8, "a connection was closed once the workers held four each"
    finally:
        for client in clients:
            client.close()
        server.terminate()
        server.wait(30)


def _answer_once(url: str) -> str | None:
    """The process id that answered a new connection (closed after it), None while nothing listens."""
    with httpx.Client(base_url=url, timeout=10) as client:
        return _answer(client)


def _answer(client: httpx.Client) -> str | None:
    """The process id that answered, None while nothing listens."""
    try:
        return client.get("/").text
    except httpx.TransportError:
        return None
