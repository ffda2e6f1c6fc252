"""The OpenAPI document's schema of mem0's filters says what the parser takes: a filter the schema allows
parses and compiles, one it refuses is refused by the parser or the compiler too (so a schema-valid request
is never a 400)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from strataflow.adapters.conditions import Bound, FilterError
from strataflow.adapters.mem0_filters import parse_filters
from strataflow.service import mem0_filter_schema

ACCEPTED = [
    {"user_id": "u48213"},
    {"user_id": ["a", 7], "topic": "music", "prio": {"gte": 2, "lt": 9.5}},
    {
        "AND": [
            {"agent_id": "a1"},
            {"OR": [{"city": "Lisbon"}, {"NOT": [{"created_at": {"gt": "2026-01-02"}}]}]},
        ]
    },
    {"$or": [{"run_id": "*"}, {"metadata": {"tags": {"contains": "x"}, "n": {"ne": None}}}]},
    {"categories": {"in": ["work", "family"]}, "updated_at": "2026-11-20T09:00:00+01:00", "": True},
]
REFUSED = [
    {"x": {}},  # an empty condition object
    {"x": {"between": [1, 2]}},  # an unknown operator
    {"$where": "1"},  # an operator that is not $and / $or / $not
    {"x": None},  # null matches nothing
    {"created_at": "yesterday"},
    {"created_at": ["2026-01-02"]},
    {"user_id": {"gt": 1.5}},
    {"AND": []},
    {"metadata": {}},
    {"AND": [{"AND": [{"AND": [{"AND": [{"x": 1}]}]}]}]},  # five levels deep
]


def _validator() -> jsonschema.protocols.Validator:
    root: dict[str, Any] = {"components": {"schemas": mem0_filter_schema.COMPONENTS}}
    schema = {**root, "$ref": "#/components/schemas/Mem0Filter1"}
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("filters", ACCEPTED)
def test_a_filter_the_schema_allows_parses(filters: dict[str, Any]) -> None:
    assert _validator().is_valid(filters)
    parse_filters(filters).sql("i", Bound())  # parsed and compiled


@pytest.mark.parametrize("filters", REFUSED)
def test_a_filter_the_schema_refuses_is_refused_by_the_parser(filters: dict[str, Any]) -> None:
    assert not _validator().is_valid(filters)
    with pytest.raises(FilterError):
        parse_filters(filters).sql("i", Bound())
