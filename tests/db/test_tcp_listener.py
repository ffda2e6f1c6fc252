"""STRATAFLOW_DB_PORT: the embedded server also listens on 127.0.0.1:P with SCRAM passwords, and a role's URL
is the TCP URL a BI tool takes, with the session time zone set (issue 46, R7 and R9): the URL accepts SCRAM
only, so a process that took the port while the server was down and asks for a cleartext password gets
none; the port is taken when the server starts (a port another process holds leaves it on its socket, up);
a running server is never restarted for another port; a login role holds at most ROLE_CONNECTIONS
sessions, and a login that does not authenticate is cut after authentication_timeout."""

from __future__ import annotations

import os
import socket
import struct
import threading
from pathlib import Path

import psycopg
import pytest

from strataflow.config import Settings
from strataflow.db import embedded, passwords
from strataflow.db.engine import role_libpq_url, with_timezone
from strataflow.db.roles import ROLE_CONNECTIONS, AccessError


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_socket_uri_becomes_a_tcp_uri_with_login_and_database_kept_scram_only() -> None:
    uri = "postgresql://bi:p%40ss@/postgres?host=/tmp/sock&port=6001"
    assert embedded.tcp_uri(uri, 6001) == (
        "postgresql://bi:p%40ss@127.0.0.1:6001/postgres?require_auth=scram-sha-256"
    )
    assert with_timezone("postgresql://a@h:1/db", "Asia/Shanghai").endswith(
        "?options=-c%20TimeZone%3DAsia%2FShanghai"
    )


def _postmaster_pid(home: Path) -> str:
    return (embedded.pgdata_dir(home) / "postmaster.pid").read_text().splitlines()[0]


def _role(home: Path, owner: str, name: str) -> None:
    with psycopg.connect(owner) as conn:
        conn.execute(f"create role {name} login password 'bi-secret'")
        conn.commit()
    passwords.store_role_password(home, name, "bi-secret")


def test_the_port_is_taken_at_start_and_a_running_server_is_never_restarted_for_another(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    home, port, other = tmp_path_factory.mktemp("tcp-home"), _free_port(), _free_port()
    try:
        owner = embedded.ensure_running(home, port)  # started here: it listens on the port
        assert "require_auth=scram-sha-256" in owner and embedded.listening_port(home) == port
        _role(home, owner, "bi_tcp")
        settings = Settings(home=home, db_port=port, timezone="Asia/Shanghai")
        url = role_libpq_url(settings, "bi_tcp")
        assert f"@127.0.0.1:{port}/" in url and "require_auth=scram-sha-256" in url
        with psycopg.connect(url, connect_timeout=10) as conn:
            assert conn.execute("show timezone").fetchone() == ("Asia/Shanghai",)
            assert conn.info.host == "127.0.0.1"
            assert conn.execute("show authentication_timeout").fetchone() == ("10s",)
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(url.replace("bi-secret", "wrong"), connect_timeout=10).close()
        pid = _postmaster_pid(home)
        assert embedded.ensure_running(home, other) == owner  # R9: another port restarts nothing
        assert _postmaster_pid(home) == pid and embedded.listening_port(home) == port
        with pytest.raises(AccessError, match=f"listens on 127.0.0.1:{port}, not 127.0.0.1:{other}"):
            role_libpq_url(settings.model_copy(update={"db_port": other}), "bi_tcp")
    finally:
        embedded.stop(home)


def test_a_port_held_by_another_process_leaves_the_server_up_on_its_socket(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    home = tmp_path_factory.mktemp("squatted-home")
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen(1)
    port = squatter.getsockname()[1]
    try:
        owner = embedded.ensure_running(home, port)
        with psycopg.connect(owner, connect_timeout=10) as conn:  # up, on its socket
            assert conn.execute("select 1").fetchone() == (1,)
        assert embedded.listening_port(home) is None
        _role(home, owner, "bi_squat")
        with pytest.raises(AccessError, match="socket only"):  # no URL that points at the squatter
            role_libpq_url(Settings(home=home, db_port=port), "bi_squat")
    finally:
        squatter.close()
        embedded.stop(home)


def _cleartext_asker(server: socket.socket, seen: list[bytes]) -> None:
    """A squatter on the port: refuses SSL and GSS, asks for the password in clear text, records it."""
    conn, _ = server.accept()
    with conn:
        conn.settimeout(10)
        while True:
            size, code = struct.unpack("!II", conn.recv(8))
            conn.recv(size - 8)
            if code in (80877103, 80877104):  # SSLRequest, GSSENCRequest: no
                conn.sendall(b"N")
                continue
            break
        conn.sendall(b"R" + struct.pack("!II", 8, 3))  # AuthenticationCleartextPassword
        try:
            seen.append(conn.recv(1024))
        except OSError:
            pass


def test_a_role_url_sends_no_password_to_a_server_that_asks_for_it_in_clear(tmp_path: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    seen: list[bytes] = []
    threading.Thread(target=_cleartext_asker, args=(server, seen), daemon=True).start()
    url = embedded.tcp_uri("postgresql://bi:s3cret-pass@/postgres?host=/tmp", server.getsockname()[1])
    with pytest.raises(psycopg.OperationalError, match="cleartext|password"):
        psycopg.connect(url, connect_timeout=5).close()
    server.close()
    assert not any(b"s3cret-pass" in message for message in seen), seen


def test_a_new_login_role_holds_a_bounded_number_of_sessions(engine: object) -> None:
    from sqlalchemy import Engine, text

    from strataflow.db import roles

    assert isinstance(engine, Engine)
    name = f"t_limit_{os.getpid()}"
    with engine.begin() as conn:
        roles.create_role(conn, name, "analyst", with_password=False)
        limit = conn.execute(
            text("select rolconnlimit from pg_roles where rolname = :r"), {"r": name}
        ).scalar()
        conn.execute(text(f"drop role {name}"))
    assert limit == ROLE_CONNECTIONS
