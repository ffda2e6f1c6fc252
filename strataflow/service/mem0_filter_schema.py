"""The JSON schema of mem0's `filters` as strataflow.adapters.mem0_filters parses them, so the OpenAPI
document says exactly which filters the service takes (a schema-valid filter is never refused): entity and
category fields compare texts, created_at and updated_at ISO 8601 times, any other key a metadata field's
JSON value; AND / OR / NOT (and $and, $or, $not) nest lists of filters MAX_DEPTH levels deep. Only the
total of MAX_CONDITIONS conditions is beyond a JSON schema (422 naming it)."""

from __future__ import annotations

from typing import Any

from strataflow.adapters.conditions import MAX_VALUES, OPERATORS
from strataflow.adapters.mem0_filters import IDENTITY_FIELDS, LOGIC, MAX_DEPTH, TIME_FIELDS

TEXT_FIELDS = (*IDENTITY_FIELDS, "categories")
RANGE = ("gt", "gte", "lt", "lte")
# ISO 8601 as datetime.fromisoformat reads it (a time without an offset is UTC)
ISO_TIME = (
    r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])"
    r"(T([01][0-9]|2[0-3]):[0-5][0-9](:[0-5][0-9](\.[0-9]{1,6})?)?(Z|[+-](0[0-9]|1[0-3]):[0-5][0-9])?)?$"
)


def _any_of(*schemas: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": list(schemas)}


def _listed(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "minItems": 1, "maxItems": MAX_VALUES, "items": item}


def _operators(by_operator: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"type": "object", "minProperties": 1, "additionalProperties": False, "properties": by_operator}


_STRING = {"type": "string"}
_NUMBER = {"type": "number"}
_SCALAR = _any_of(_STRING, _NUMBER, {"type": "boolean"})
_TEXT = _any_of(_STRING, {"type": "integer"})
_TIME = {"type": "string", "pattern": ISO_TIME}
_JSON_VALUE = _any_of(_SCALAR, {"type": "null"}, _listed(_SCALAR))

TEXT_CONDITION = _any_of(
    _TEXT,
    _listed(_TEXT),
    _operators({op: (_listed(_TEXT) if op in ("in", "nin") else _TEXT) for op in OPERATORS}),
)
TIME_CONDITION = _any_of(_TIME, {"const": "*"}, _operators({op: _TIME for op in ("eq", "ne", *RANGE)}))
METADATA_CONDITION = _any_of(
    _SCALAR,
    _listed(_SCALAR),
    _operators(
        {"eq": _JSON_VALUE, "ne": _JSON_VALUE, **{op: _any_of(_STRING, _NUMBER) for op in RANGE}}
        | {"in": _listed(_SCALAR), "nin": _listed(_SCALAR), "contains": _STRING, "icontains": _STRING}
    ),
)


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _filter(depth: int) -> dict[str, Any]:
    """A filter at this nesting depth (1: the request's own `filters`)."""
    text, time, metadata = _ref("Mem0TextCondition"), _ref("Mem0TimeCondition"), _ref("Mem0MetadataCondition")
    properties: dict[str, Any] = {name: text for name in TEXT_FIELDS} | {name: time for name in TIME_FIELDS}
    properties["metadata"] = {"type": "object", "minProperties": 1, "additionalProperties": metadata}
    if depth < MAX_DEPTH:
        inner = _ref(f"Mem0Filter{depth + 1}")
        properties |= {key: {"type": "array", "minItems": 1, "items": inner} for key in LOGIC}
    return {
        "type": "object",
        "properties": properties,
        "additionalProperties": metadata,
        # a key starting with $ is an operator (only $and, $or, $not); past MAX_DEPTH, no logic at all
        "propertyNames": _key_names(depth),
    }


def _key_names(depth: int) -> dict[str, Any]:
    plain = {"pattern": r"^([^$\x00][^\x00]*)?$"}
    if depth >= MAX_DEPTH:
        return {**plain, "not": {"enum": list(LOGIC)}}
    return {"anyOf": [plain, {"enum": [key for key in LOGIC if key.startswith("$")]}]}


MARK = "x-strataflow-mem0-filter"  # a request's `filters`: the document makes it a reference to Mem0Filter1


def refer(node: dict[str, Any]) -> None:
    """A node marked MARK (pydantic cannot hold a reference to a component it did not make) becomes one."""
    if node.pop(MARK, False):
        kept = {key: node[key] for key in ("description", "examples") if key in node}
        node.clear()
        node.update(_ref("Mem0Filter1"), **kept)


COMPONENTS: dict[str, dict[str, Any]] = {  # the OpenAPI document's components it refers to
    "Mem0TextCondition": TEXT_CONDITION,
    "Mem0TimeCondition": TIME_CONDITION,
    "Mem0MetadataCondition": METADATA_CONDITION,
    **{f"Mem0Filter{depth}": _filter(depth) for depth in range(1, MAX_DEPTH + 1)},
}
