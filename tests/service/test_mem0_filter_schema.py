"""The OpenAPI document's schema of mem0's filters is the parser's grammar, both ways (Schemathesis' positive
and negative checks in the tenancy check): a filter the schema allows parses and compiles, the largest one
within MAX_CONDITIONS; one it refuses is refused by the parser or the compiler (400 or 422)."""

from __future__ import annotations

from typing import Any

import jsonschema_rs
import pytest

from strataflow.adapters.conditions import Bound, FilterError
from strataflow.adapters.mem0_filters import (
    FILTER_KEYS,
    MAX_CONDITIONS,
    MAX_PARTS,
    METADATA_KEYS,
    Condition,
    Group,
    parse_filters,
)
from strataflow.service import mem0_filter_schema

ACCEPTED = [
    {},
    {"user_id": "u48213"},
    {"user_id": ["a", 7], "topic": "music", "prio": {"gte": 2, "lt": 9.5}},
    {"agent_id": 7.0, "run_id": "*", "app_id": {"nin": ["x"]}, "categories": {"contains": "work"}},
    {"AND": [{"agent_id": "a1"}, {"city": "Lisbon"}], "NOT": [{"created_at": {"gt": "2026-01-02"}}]},
    {"OR": [{"run_id": "*"}, {"metadata": {"tags": {"icontains": "x"}, "n": {"ne": None}}}]},
    {"categories": {"in": ["work", "family"]}, "updated_at": "2026-11-20T09:00:00+01:00", "": True},
    {"created_at": {"gte": "2026-11-20t09:00:00z", "lt": "2016-12-31T23:59:60Z"}, "x": [None, 1, "a"]},
    {"updated_at": "*", "score": {"eq": None}, "metadata": {"$x": False}},
]
REFUSED = [
    {"x": {}},  # an empty condition object
    {"x": {"between": [1, 2]}},  # an unknown operator
    {"x": {"gt": 1, "lt": 5, "ne": 3}},  # more than MAX_OPERATORS
    {"$where": "1"},  # $ keys are operators: none but AND, OR, NOT
    {"$or": [{"x": 1}]},
    {"$": 1},
    {"x": None},  # null matches nothing
    {"x": {"eq": {"a": 1}}},  # metadata values are JSON scalars
    {"x": [[1]]},
    {"x": {"in": []}},
    {"x": "a\x00b"},  # PostgreSQL's text holds no NUL
    {"a\x00": 1},
    {"x": {"gt": True}},
    {"x": {"contains": 1}},
    {"created_at": "yesterday"},
    {"created_at": ["2026-01-02"]},
    {"created_at": {"in": ["2026-01-02"]}},
    {"user_id": {"gt": 1.5}},
    {"user_id": True},
    {"AND": []},
    {"AND": [{"x": 1}] * (MAX_PARTS + 1)},
    {"metadata": {}},
    {"AND": [{"OR": [{"x": 1}]}]},  # lists of filters do not nest
    {f"k{i}": i for i in range(FILTER_KEYS[0] + 1)},
    {"metadata": {f"k{i}": i for i in range(METADATA_KEYS[0] + 1)}},
    {"OR": [{f"k{i}": i for i in range(FILTER_KEYS[1] + 1)}]},
]


def _validator() -> jsonschema_rs.Draft202012Validator:
    """The validator Schemathesis judges requests with (formats checked: RFC 3339 allows 't', 'z', :60)."""
    components = {"schemas": mem0_filter_schema.COMPONENTS}
    schema = {"components": components, "$ref": "#/components/schemas/Mem0Filter"}
    return jsonschema_rs.Draft202012Validator(schema, validate_formats=True)


def _largest() -> dict[str, Any]:
    """A filter at every bound the schema sets: the most conditions it allows."""

    def fields(keys: int, metadata: int) -> dict[str, Any]:
        pair = {"gte": 1, "lt": 9}
        return {"metadata": {f"m{i}": pair for i in range(metadata)}} | {f"f{i}": pair for i in range(keys)}

    part = fields(FILTER_KEYS[1] - 1, METADATA_KEYS[1])
    logic = {key: [part] * MAX_PARTS for key in ("AND", "OR", "NOT")}
    return logic | fields(FILTER_KEYS[0] - len(logic) - 1, METADATA_KEYS[0])


@pytest.mark.parametrize("filters", [*ACCEPTED, _largest()])
def test_a_filter_the_schema_allows_parses_and_compiles(filters: dict[str, Any]) -> None:
    assert _validator().is_valid(filters), next(_validator().iter_errors(filters), None)
    ids = {"user_id": "u", "agent_id": "a", "run_id": "r", "app_id": "p"}  # a request's top-level ids too
    parse_filters(filters, **ids).sql("i", Bound())


def test_the_largest_filter_is_within_max_conditions() -> None:
    def count(node: Group | Condition) -> int:
        return 1 if isinstance(node, Condition) else sum(count(part) for part in node.parts)

    largest = count(parse_filters(_largest(), user_id="u", agent_id="a", run_id="r", app_id="p").root)
    assert largest == 238 <= MAX_CONDITIONS  # the bounds allow 238 conditions (the 4 top-level ids too)


@pytest.mark.parametrize("filters", REFUSED)
def test_a_filter_the_schema_refuses_is_refused_by_the_parser(filters: dict[str, Any]) -> None:
    assert not _validator().is_valid(filters)
    with pytest.raises(FilterError):
        parse_filters(filters).sql("i", Bound())
