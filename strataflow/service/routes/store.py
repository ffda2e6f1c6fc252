"""POST /v1/store/batch: LangGraph's BaseStore operations (strataflow.integrations.langgraph), run in one
transaction by strataflow.adapters.store (the mapping, the time to live, prefixes and filters in SQL, one
vector per indexed field path); this route parses the batch, calls it and shapes the results."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from strataflow.adapters import store
from strataflow.adapters.conditions import FilterError
from strataflow.service.deps import ActingDep, DbDep, SettingsDep, work
from strataflow.service.errors import ApiError, error_responses
from strataflow.service.store_schemas import (
    MAX_SEARCH_OPS,
    GetOp,
    ListNamespacesOp,
    PutOp,
    SearchOp,
    StoreBatch,
    StoreItem,
    StoreResults,
)

router = APIRouter(prefix="/v1/store", tags=["langgraph store"])


@router.post(
    "/batch", response_model=StoreResults, responses=error_responses(),
    dependencies=[work("store_batch", "heavy")],
)  # fmt: skip
def batch(body: StoreBatch, db: DbDep, acting: ActingDep, settings: SettingsDep) -> StoreResults:
    """Run the operations in order in one transaction; one result each (see StoreResults)."""
    searches = sum(isinstance(op, SearchOp) for op in body.ops)
    if searches > MAX_SEARCH_OPS:
        raise ApiError(
            422, f"a batch runs at most {MAX_SEARCH_OPS} search operations, got {searches}", "ops",
            code="too_many_searches",
        )  # fmt: skip
    if any(isinstance(op, PutOp) for op in body.ops):
        acting.require_writer()
    may_write = acting.caller.kind == "agent"  # a read-only key's reads restart no ttl
    scope = store.StoreScope(acting.namespace, acting.agent, body.subject_at, may_write=may_write)
    try:
        found = store.run_batch(db, settings, scope, [_op(op) for op in body.ops])
    except FilterError as exc:
        raise ApiError(422, str(exc), exc.where, code="invalid_filter") from None
    return StoreResults(results=[_shown(result) for result in found])


def _op(op: GetOp | PutOp | SearchOp | ListNamespacesOp) -> store.Op:
    if isinstance(op, GetOp):
        return store.Get(tuple(op.namespace), op.key, op.refresh_ttl)
    if isinstance(op, PutOp):
        return store.Put(tuple(op.namespace), op.key, op.value, op.index, op.ttl)
    if isinstance(op, SearchOp):
        return store.Search(
            tuple(op.namespace), op.query, op.filter, op.limit, op.offset, op.refresh_ttl, op.threshold
        )
    matches = tuple(store.Match(c.match_type, tuple(c.path)) for c in op.match_conditions)
    return store.ListNamespaces(matches, op.max_depth, op.limit, op.offset)


def _shown(result: Any) -> Any:
    if isinstance(result, store.Item):
        return _item(result)
    if isinstance(result, list):
        return [_item(r) if isinstance(r, store.Item) else list(r) for r in result]
    return result


def _item(item: store.Item) -> StoreItem:
    return StoreItem(
        namespace=list(item.namespace), key=item.key, value=item.value, created_at=item.created_at,
        updated_at=item.updated_at, score=item.score,
    )  # fmt: skip
