"""Bodies and answers of POST /v1/store/batch: the operations of LangGraph's BaseStore (get, put, search,
list_namespaces), as strataflow.integrations.langgraph sends them (strataflow.service.routes.store).

Limits (bounded work per request): MAX_OPS operations per batch, of which at most MAX_SEARCH_OPS searches
(each a ranked search), keys up to MAX_KEY_CHARS characters (LangGraph sets none; PostgresStore keeps text),
labels up to 200 (any text without NUL, as PostgresStore keeps them: the client refuses "." as BaseStore
does); the body's own cap (STRATAFLOW_API_MAX_BODY_BYTES) bounds the rest."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StringConstraints

from strataflow.service.schemas import Agent, Metadata, QueryText, Strict

MAX_OPS = 1000  # operations of one batch (one request, one transaction)
MAX_SEARCH_OPS = 20  # of which searches: each is a ranked search
MAX_KEY_CHARS = 4096
IndexPath = Annotated[str, StringConstraints(min_length=1, max_length=200)]
# A label: any text without NUL (the one that is the user maps to a subject: strataflow.adapters.store_paths)
Label = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00]*$")]
Key = Annotated[str, StringConstraints(min_length=1, max_length=MAX_KEY_CHARS, pattern=r"^[^\x00]*$")]
Namespace = Annotated[list[Label], Field(min_length=1, max_length=10)]


class MatchCondition(Strict):
    match_type: Literal["prefix", "suffix"]
    path: list[Label] = Field(max_length=20, description="labels; '*' matches any one label")


class GetOp(Strict):
    op: Literal["get"]
    namespace: Namespace
    key: Key
    refresh_ttl: bool = Field(True, description="restart the item's ttl (if it has one)")


class PutOp(Strict):
    op: Literal["put"]
    namespace: Namespace
    key: Key
    value: Metadata | None = Field(None, description="the item's value; null deletes the item")
    index: Literal[False] | Annotated[list[IndexPath], Field(max_length=20)] | None = Field(
        None, description="false: not embedded (not found by meaning); a list: the value's field paths "
        "(LangGraph's: dotted, [n], [*], {a,b}, '$' the whole value), one vector per text; null: the "
        "value's content text, else its fields",
    )  # fmt: skip
    ttl: float | None = Field(
        None, gt=0, le=525_600_000, description="minutes after the last write (or read) when it expires"
    )


class SearchOp(Strict):
    op: Literal["search"]
    namespace: list[Label] = Field(default_factory=list, max_length=10, description="the prefix")
    query: QueryText | None = Field(None, description="what to look for (meaning and words)")
    filter: Metadata | None = Field(
        None, description="value fields, each a value or {$eq|$ne|$gt|$gte|$lt|$lte|$in|$nin: ...}"
    )
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=10_000)
    refresh_ttl: bool = Field(True, description="restart the ttl of the items returned")
    threshold: float | None = Field(
        None, ge=0, le=1, description="only items scoring at least this (0..1, docs/retrieval.md)"
    )


class ListNamespacesOp(Strict):
    op: Literal["list_namespaces"]
    match_conditions: list[MatchCondition] = Field(default_factory=list, max_length=10)
    max_depth: int | None = Field(None, ge=1, le=20)
    limit: int = Field(100, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=10_000)


StoreOp = Annotated[GetOp | PutOp | SearchOp | ListNamespacesOp, Field(discriminator="op")]


class StoreBatch(Strict):
    ops: list[StoreOp] = Field(min_length=1, max_length=MAX_OPS)
    subject_at: int = Field(
        1, ge=0, le=10, description="the namespace label that is the user (subject): ('memories', user_id)"
    )
    agent: Agent = None


class StoreItem(BaseModel):
    namespace: list[str]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    score: float | None = None


class StoreResults(BaseModel):
    """One result per operation, in order: get -> an item or null; put -> null; search -> a list of items;
    list_namespaces -> a list of namespaces (lists of labels)."""

    results: list[StoreItem | list[StoreItem] | list[list[str]] | None]
