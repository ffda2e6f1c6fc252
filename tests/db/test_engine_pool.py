"""A process's pool keeps the connections it opened (issue 49): an API worker running its scans at once reuses
the same server backends, never opening and closing one per request."""

from __future__ import annotations

from sqlalchemy import Engine, text

from strataflow.config import Settings
from strataflow.db.engine import MAX_OVERFLOW, POOL_SIZE, _create_engine


def test_connections_used_at_once_are_kept_and_used_again(engine: Engine, settings: Settings) -> None:
    fresh = _create_engine(engine.url.render_as_string(hide_password=False), settings.timezone)
    try:

        def backends() -> set[int]:
            conns = [fresh.connect() for _ in range(POOL_SIZE + MAX_OVERFLOW)]  # as many as a worker may hold
            try:
                return {int(c.execute(text("select pg_backend_pid()")).scalar_one()) for c in conns}
            finally:
                for conn in conns:
                    conn.close()

        first = backends()
        assert len(first) == 4 and fresh.pool.checkedin() == 4  # type: ignore[attr-defined]
        assert backends() == first  # the same backends: none closed when given back
    finally:
        fresh.dispose()
