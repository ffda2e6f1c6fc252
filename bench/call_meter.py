"""Where one call's time goes: seconds spent encoding texts (every configured embedder's `encode` and
`encode_queries`, outermost call only) and running SQL statements (the engine's cursor executes, results
included: psycopg reads them in execute), and how many encodes it made. The query is encoded on a worker
thread while the first statements run, so the two may overlap; what is left of a call's time is Python
(ranking, budget, rendering) and waiting for a pooled connection.

Used by bench.context to show encode and SQL apart (`context_encode_*_ms`, `context_sql_*_ms`,
`encodes_per_context`); it wraps the embedders of this process and listens on the engine's events, nothing
else changes.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

from sqlalchemy import Engine, event


class CallMeter:
    def __init__(self, settings: Any, engine: Engine) -> None:
        from strataflow.llm.embeddings import embedding_models, get_embedder

        self._lock = threading.Lock()
        self._local = threading.local()
        self.encode_s = self.sql_s = 0.0
        self.encodes = 0
        event.listen(engine, "before_cursor_execute", self._before)
        event.listen(engine, "after_cursor_execute", self._after)
        for model in embedding_models(settings):
            embedder = get_embedder(settings, model)
            for name in ("encode", "encode_queries"):
                setattr(embedder, name, self._timed(getattr(embedder, name)))

    def take(self) -> tuple[float, float, int]:
        """(encode ms, SQL ms, encodes) since the last take, and start again from zero."""
        with self._lock:
            taken = (self.encode_s * 1000, self.sql_s * 1000, self.encodes)
            self.encode_s = self.sql_s = 0.0
            self.encodes = 0
        return taken

    def _timed(self, encode: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(encode)
        def timed(*args: Any, **kwargs: Any) -> Any:
            depth = getattr(self._local, "depth", 0)
            self._local.depth = depth + 1
            started = time.perf_counter()
            try:
                return encode(*args, **kwargs)
            finally:
                self._local.depth = depth
                if depth == 0:  # encode_queries calling encode is one encode
                    with self._lock:
                        self.encode_s += time.perf_counter() - started
                        self.encodes += 1

        return timed

    def _before(
        self, _conn: Any, _cursor: Any, _statement: str, _params: Any, context: Any, _many: bool
    ) -> None:
        context._meter_started = time.perf_counter()

    def _after(
        self, _conn: Any, _cursor: Any, _statement: str, _params: Any, context: Any, _many: bool
    ) -> None:
        started = getattr(context, "_meter_started", None)
        if started is not None:
            with self._lock:
                self.sql_s += time.perf_counter() - started
