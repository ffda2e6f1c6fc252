"""Database passwords: generated, set on the server as SCRAM-SHA-256 verifiers, kept in STRATAFLOW_HOME.

Layout (the directory is 0700, every file 0600, owned by the user that runs strataflow):

    $STRATAFLOW_HOME/secrets/owner.password          the embedded server's owner (postgres)
    $STRATAFLOW_HOME/secrets/roles/<role>.password   each role made by `strataflow access create-role`

A password never reaches the server in clear text: libpq computes the SCRAM verifier on the client
(PQencryptPasswordConn) and `alter role ... password 'SCRAM-SHA-256$...'` stores it as it is, so statement
logs and pg_stat_activity show the verifier only.
"""

from __future__ import annotations

import os
import re
import secrets
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

ROLE_FILE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
VERIFIER = re.compile(r"^SCRAM-SHA-256\$\d+:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$")


def secrets_dir(home: Path) -> Path:
    return home / "secrets"


def owner_password_path(home: Path) -> Path:
    return secrets_dir(home) / "owner.password"


def role_password_path(home: Path, role: str) -> Path:
    if not ROLE_FILE_NAME.match(role):
        raise ValueError(f"role name {role!r} must be lower snake_case to have a password file")
    return secrets_dir(home) / "roles" / f"{role}.password"


def generate_password() -> str:
    """32 URL-safe characters (192 bits): no quoting needed in a URL or a .pgpass line."""
    return secrets.token_urlsafe(24)


def read_secret(path: Path) -> str | None:
    """The password stored at path, or None when there is none."""
    try:
        value = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
    return value or None


def write_secret(path: Path, value: str) -> None:
    """Write value to path with mode 0600 (directories 0700), replacing any earlier file atomically."""
    root = next((parent for parent in path.parents if parent.name == "secrets"), path.parent)
    for directory in (root, path.parent):
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        directory.chmod(0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, (value + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def role_password(home: Path, role: str) -> str | None:
    return read_secret(role_password_path(home, role))


def store_role_password(home: Path, role: str, password: str) -> None:
    write_secret(role_password_path(home, role), password)


def scram_verifier(dbapi_conn: psycopg.Connection[Any], role: str, password: str) -> str:
    """The SCRAM-SHA-256 verifier of password for role, computed by libpq on this side of the connection."""
    verifier = dbapi_conn.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256").decode()
    if not VERIFIER.match(verifier):
        raise RuntimeError("libpq returned an unexpected password verifier; refusing to set it")
    return verifier


def set_password(dbapi_conn: psycopg.Connection[Any], role: str, password: str) -> None:
    """Give role this password, sent as its SCRAM verifier (on the caller's connection and transaction)."""
    verifier = scram_verifier(dbapi_conn, role, password)
    statement = sql.SQL("alter role {} password {}").format(sql.Identifier(role), sql.Literal(verifier))
    dbapi_conn.execute(statement)
