"""STRATAFLOW_DB_PORT: the embedded server also listens on 127.0.0.1:P with SCRAM passwords, and a role's URL
is the TCP URL a BI tool takes, with the session time zone set."""

from __future__ import annotations

import socket

import psycopg
import pytest

from strataflow.config import Settings
from strataflow.db import embedded
from strataflow.db.engine import role_libpq_url, with_timezone


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_socket_uri_becomes_a_tcp_uri_with_login_and_database_kept() -> None:
    uri = "postgresql://bi:p%40ss@/postgres?host=/tmp/sock&port=6001"
    assert embedded.tcp_uri(uri, 6001) == "postgresql://bi:p%40ss@127.0.0.1:6001/postgres"
    assert with_timezone("postgresql://a@h:1/db", "Asia/Shanghai").endswith(
        "?options=-c%20TimeZone%3DAsia%2FShanghai"
    )


def test_the_server_listens_on_the_port_and_asks_for_the_password(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    home, port = tmp_path_factory.mktemp("tcp-home"), _free_port()
    try:
        embedded.ensure_running(home)  # a socket-only server first, as an existing home has
        owner = embedded.ensure_running(home, port)  # restarted once to listen on the port
        with psycopg.connect(owner) as conn:  # the socket still answers
            conn.execute("create role bi_tcp login password 'bi-secret'")
            conn.commit()
        settings = Settings(home=home, db_port=port, timezone="Asia/Shanghai")
        from strataflow.db import passwords

        passwords.store_role_password(home, "bi_tcp", "bi-secret")
        url = role_libpq_url(settings, "bi_tcp")
        assert f"@127.0.0.1:{port}/" in url
        with psycopg.connect(url, connect_timeout=10) as conn:
            assert conn.execute("show timezone").fetchone() == ("Asia/Shanghai",)
            assert conn.info.host == "127.0.0.1"
        with pytest.raises(psycopg.OperationalError, match="password"):
            psycopg.connect(url.replace("bi-secret", "wrong"), connect_timeout=10).close()
        assert embedded.ensure_running(home, port) == owner  # already listening: no second restart
    finally:
        embedded.stop(home)
