"""The JSON schema of mem0's `filters` in the OpenAPI document, exactly the grammar
strataflow.adapters.mem0_filters parses: a filter the schema allows is never refused for its shape (400), and
one it refuses is refused (Schemathesis checks both ways). It is flat, so that Schemathesis' coverage phase
walks it in seconds: no recursive components, the condition objects typed per field.

A filter is an object of fields, each a value (equality; "*": any value), a list (one of) or an object of
operators; `metadata`, an object of metadata fields; any other key a metadata field; AND / OR / NOT, lists of
filters, MAX_DEPTH levels in all (Mem0Filter, Mem0Filter2; the last has no logic keys), each bounded as the
grammar bounds it (mem0_filters.FILTER_KEYS, ...). Entity fields and categories compare texts (or integers),
created_at / updated_at RFC 3339 dates or times, metadata fields JSON scalars. Without the bounds on every
object (as in mem0_filters until now) the coverage phase made 7,856 requests of the two operations, not 299.
"""

from __future__ import annotations

from typing import Any

from models.messages import NO_NUL
from strataflow.adapters.conditions import MAX_VALUES, OPERATORS, RANGE
from strataflow.adapters.mem0_filters import (
    FILTER_KEYS,
    IDENTITY_FIELDS,
    LOGIC,
    MAX_DEPTH,
    MAX_OPERATORS,
    MAX_PARTS,
    METADATA_KEYS,
    TIME_FIELDS,
)

TEXT_FIELDS = (*IDENTITY_FIELDS, "categories")
TIME_OPERATORS = ("eq", "ne", *RANGE)
FREE_KEY = r"^([^$\x00][^\x00]*)?$"  # a key starting with $ is an operator to the grammar: refused


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


def _listed(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "minItems": 1, "maxItems": MAX_VALUES, "items": item}


def _operators(by_operator: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "object", "minProperties": 1, "maxProperties": MAX_OPERATORS, "additionalProperties": False,
        "properties": by_operator,
    }  # fmt: skip


_TEXT: dict[str, Any] = {"type": ["string", "integer"], "pattern": NO_NUL}
_SCALAR: dict[str, Any] = {"type": ["string", "number", "boolean"], "pattern": NO_NUL}
_JSON_SCALAR: dict[str, Any] = {"type": ["string", "number", "boolean", "null"], "pattern": NO_NUL}
_TIME: dict[str, Any] = {"anyOf": [{"type": "string", "format": f} for f in ("date-time", "date")]}

TEXT_CONDITION = {
    "description": "a text (equality; '*': any value), a list of texts (one of) or {operator: operand}",
    "anyOf": [
        _TEXT,
        _listed(_TEXT),
        _operators({op: _listed(_TEXT) if op in ("in", "nin") else _TEXT for op in OPERATORS}),
    ],
}
TIME_CONDITION = {
    "description": "an RFC 3339 date or time (equality), '*' (any value) or {operator: time} with eq, ne, "
    "gt, gte, lt, lte",
    "anyOf": [_TIME, {"const": "*"}, _operators(dict.fromkeys(TIME_OPERATORS, _TIME))],
}
METADATA_CONDITION = {
    "description": "a value (equality; '*': any value), a list (one of) or {operator: operand}: gt, gte, "
    "lt, lte compare numbers with numbers and texts with texts, contains / icontains find a text",
    "anyOf": [
        _SCALAR,
        _listed(_JSON_SCALAR),
        _operators(
            {op: _JSON_SCALAR for op in ("eq", "ne")}
            | {op: _listed(_JSON_SCALAR) for op in ("in", "nin")}
            | {op: {"type": ["string", "number"], "pattern": NO_NUL} for op in RANGE}
            | {"contains": {"type": "string"}, "icontains": {"type": "string"}}
        ),
    ],
}


def _name(depth: int) -> str:
    return "Mem0Filter" if depth == 1 else f"Mem0Filter{depth}"


def _filter(depth: int) -> dict[str, Any]:
    """The filter object at this depth (1: a request's `filters`; MAX_DEPTH: no logic keys)."""
    metadata = _ref("Mem0MetadataCondition")
    properties: dict[str, Any] = {field: _ref("Mem0TextCondition") for field in TEXT_FIELDS}
    properties |= {field: _ref("Mem0TimeCondition") for field in TIME_FIELDS}
    properties["metadata"] = {
        "type": "object", "minProperties": 1, "maxProperties": METADATA_KEYS[depth - 1],
        "additionalProperties": metadata, "description": "metadata fields, each a condition",
    }  # fmt: skip
    names: dict[str, Any] = {"pattern": FREE_KEY}
    if depth < MAX_DEPTH:
        parts = {"type": "array", "minItems": 1, "maxItems": MAX_PARTS, "items": _ref(_name(depth + 1))}
        properties |= dict.fromkeys(LOGIC, parts)
    else:
        names["not"] = {"enum": list(LOGIC)}
    return {
        "type": "object", "maxProperties": FILTER_KEYS[depth - 1], "properties": properties,
        "additionalProperties": metadata, "propertyNames": names,
        "description": f"a filter {depth} level{'s' if depth > 1 else ''} deep"
        + ("" if depth < MAX_DEPTH else ": no AND / OR / NOT"),
    }  # fmt: skip


MARK = "x-strataflow-mem0-filter"  # a request's `filters`: the document makes it a reference to Mem0Filter


def refer(node: dict[str, Any]) -> None:
    """A node marked MARK (pydantic cannot refer to a component it did not make) becomes a reference."""
    if node.pop(MARK, False):
        kept = {key: node[key] for key in ("description", "examples") if key in node}
        node.clear()
        node.update(_ref("Mem0Filter"), **kept)


COMPONENTS: dict[str, dict[str, Any]] = {  # the OpenAPI document's components it refers to
    "Mem0TextCondition": TEXT_CONDITION,
    "Mem0TimeCondition": TIME_CONDITION,
    "Mem0MetadataCondition": METADATA_CONDITION,
    **{_name(depth): _filter(depth) for depth in range(1, MAX_DEPTH + 1)},
}
