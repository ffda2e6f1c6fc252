"""The wire of POST /v1/store/batch as strataflow.integrations.langgraph sends and reads it: LangGraph's
operations as the route's JSON (`body_of`), its answers as LangGraph's results (`result_of`), the requests a
batch takes (`parts`: the server's limits) and how long to wait before sending a refused one again
(`retry_after`)."""

from __future__ import annotations

import random
import time
from datetime import datetime
from typing import Any

import httpx
from langgraph.store.base import GetOp, Item, ListNamespacesOp, Op, PutOp, Result, SearchItem, SearchOp

MAX_OPS = 1000  # operations per request (the server's limit: a longer batch is several requests)
MAX_SEARCHES = 20  # search operations per request (the server's limit)
OVERRUNS = 2  # times a batch that ran past the server's time limit is sent again


def parts(ops: list[Op]) -> list[tuple[int, list[Op]]]:
    """The ops as requests the server takes: (index of the first, ops) with at most MAX_OPS operations and
    MAX_SEARCHES searches each."""
    parts: list[tuple[int, list[Op]]] = []
    start, searches = 0, 0
    for at, op in enumerate(ops):
        searches += isinstance(op, SearchOp)
        if at - start == MAX_OPS or searches > MAX_SEARCHES:
            parts.append((start, ops[start:at]))
            start, searches = at, int(isinstance(op, SearchOp))
    if ops:
        parts.append((start, ops[start:]))
    return parts


def retry_after(answer: httpx.Response, deadline: float, tries: int) -> float | None:
    """Seconds to wait before sending a refused request again, or None: do not. A 429 (or a 503 naming a
    Retry-After) says when; a 422 `too_much_work` is sent again OVERRUNS times after a second, since a batch
    of a key whose other batches hold its turns spends its time limit waiting (the server rolled it back).
    The wait is a little longer at random, so the threads waiting do not all come back at once."""
    said = answer.headers.get("Retry-After")
    if answer.status_code == 429 and said is None:
        said = "1"
    elif answer.status_code == 422 and tries < OVERRUNS and _code(answer) == "too_much_work":
        said = "1"
    elif answer.status_code not in (429, 503):
        return None
    try:
        wait = max(0.05, float(said or ""))
    except ValueError:
        return None
    wait *= 1 + random.random() / 4
    return wait if time.monotonic() + wait < deadline else None


def _code(answer: httpx.Response) -> str | None:
    try:
        return str(answer.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return None


def body_of(op: Op, threshold: float | None = None) -> dict[str, Any]:
    if isinstance(op, GetOp):
        return {"op": "get", "namespace": list(op.namespace), "key": op.key, "refresh_ttl": op.refresh_ttl}
    if isinstance(op, PutOp):
        index = op.index if op.index is False or op.index is None else list(op.index)
        return {
            "op": "put", "namespace": list(op.namespace), "key": op.key, "value": op.value, "index": index,
            "ttl": op.ttl,
        }  # fmt: skip
    if isinstance(op, SearchOp):
        return {
            "op": "search", "namespace": list(op.namespace_prefix), "query": op.query, "filter": op.filter,
            "limit": op.limit, "offset": op.offset, "refresh_ttl": op.refresh_ttl, "threshold": threshold,
        }  # fmt: skip
    if isinstance(op, ListNamespacesOp):
        conditions = [{"match_type": c.match_type, "path": list(c.path)} for c in op.match_conditions or ()]
        return {
            "op": "list_namespaces", "match_conditions": conditions, "max_depth": op.max_depth,
            "limit": op.limit, "offset": op.offset,
        }  # fmt: skip
    raise TypeError(f"unknown store operation {type(op).__name__}")


def _item(found: dict[str, Any]) -> Item:
    return Item(
        value=found["value"], key=found["key"], namespace=tuple(found["namespace"]),
        created_at=_time(found["created_at"]), updated_at=_time(found["updated_at"]),
    )  # fmt: skip


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value)


def result_of(op: Op, found: Any) -> Result:
    if isinstance(op, GetOp):
        return None if found is None else _item(found)
    if isinstance(op, SearchOp):
        return [
            SearchItem(
                namespace=tuple(hit["namespace"]),
                key=hit["key"],
                value=hit["value"],
                created_at=_time(hit["created_at"]),
                updated_at=_time(hit["updated_at"]),
                score=hit.get("score"),
            )  # fmt: skip
            for hit in found
        ]
    if isinstance(op, ListNamespacesOp):
        return [tuple(namespace) for namespace in found]
    return None
