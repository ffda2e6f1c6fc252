"""The one compiler of filter conditions into SQL, for every drop-in filter: a LangGraph store's `filter` on
an item's value ({"field.path": value | {"$op": operand}}) and mem0's filters on a memory's fields and
metadata ({"field": value | {"op": operand}}). A condition is one operator and its operand:

- eq (a bare value too): equal (JSON equality for JSON fields: 1 equals 1.0; with `members`, as mem0 OSS's
  vector stores read it, a list field also matches when one of its elements is equal);
- ne: present and not equal; gt, gte, lt, lte: a number against a number, a text against a text (by code
  point); in / nin: one of / present and none of a list (at most MAX_VALUES); contains / icontains: a text
  holding the operand (icontains: ignoring case); exists ("*"): present and not null.

A field the row does not have meets only `exists`'s negation: ne and nin need the field present (as mem0
OSS's qdrant and LangGraph's PostgresStore read them). Every value is a bound parameter (`Bound`, named f_...:
strataflow.retrieval.layer_sql.ItemFilter's rule); field names reach SQL only as bound paths or as the
fixed expressions of the caller. A condition the grammar does not have raises FilterError naming where.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime
from typing import Any

OPERATORS = ("eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "contains", "icontains")
RANGE = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
MAX_VALUES = 100  # values of one in / nin list
# RFC 3339's forms that datetime.fromisoformat does not read: a lowercase t or z, a leap second (:60)
RFC3339_REST = re.compile(r"^(\d{4}-\d\d-\d\d)[Tt](\d\d:\d\d)(:60)?(.*?)[zZ]?$")
EXISTS = "exists"  # the wildcard "*": any value


class FilterError(ValueError):
    """A filter strataflow does not take (HTTP 400); `where` names the part (e.g. filters.AND[1].prio)."""

    def __init__(self, where: str, message: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where = where


class FilterTooLarge(FilterError):
    """A filter past the bounds of one request (HTTP 422, naming the bound)."""


class Bound:
    """The bound parameters of one compiled filter, named f_0, f_1, ... in the order they are bound."""

    def __init__(self) -> None:
        self.params: dict[str, Any] = {}

    def __call__(self, value: Any, sql_type: str) -> str:
        name = f"f_{len(self.params)}"
        self.params[name] = value
        return f"cast(:{name} as {sql_type})"

    def json(self, value: Any) -> str:
        return self(json.dumps(value, ensure_ascii=False), "jsonb")

    def json_list(self, values: list[Any]) -> str:
        return f"cast({self([json.dumps(v, ensure_ascii=False) for v in values], 'text[]')} as jsonb[])"


def _listed(op: str, operand: Any, where: str) -> list[Any]:
    if not isinstance(operand, list) or not operand:
        raise FilterError(where, f"{op} takes a non-empty list of values, got {json.dumps(operand)[:80]}")
    if len(operand) > MAX_VALUES:
        raise FilterTooLarge(where, f"{op} takes at most {MAX_VALUES} values, got {len(operand)}")
    return operand


def _scalar(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool))


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def json_condition(x: str, op: str, operand: Any, bind: Bound, where: str, *, members: bool = False) -> str:
    """The condition on the JSON value `x` (a jsonb expression, SQL null when the field is absent)."""
    if op == EXISTS:
        return f"({x} is not null and {x} <> 'null'::jsonb)"
    if op in ("eq", "ne"):
        if isinstance(operand, float) and not math.isfinite(operand):
            raise FilterError(where, f"{op} takes a JSON value")
        value = bind.json(operand)
        equal = f"{x} = {value}"
        if members and _scalar(operand):
            equal = f"({equal} or (jsonb_typeof({x}) = 'array' and {x} @> jsonb_build_array({value})))"
        return equal if op == "eq" else f"({x} is not null and not {equal})"
    if op in RANGE:
        if _number(operand):
            value = bind(str(operand), "numeric")
            return f"(jsonb_typeof({x}) = 'number' and cast({x} as numeric) {RANGE[op]} {value})"
        if isinstance(operand, str):
            value = bind(operand, "text")
            return f"""(jsonb_typeof({x}) = 'string' and ({x} #>> '{{}}') collate "C" {RANGE[op]} {value})"""
        raise FilterError(where, f"{op} compares with a number or a text, got {json.dumps(operand)[:80]}")
    if op in ("in", "nin"):
        values = bind.json_list(_listed(op, operand, where))
        found = f"{x} = any({values})"
        if members:
            found = (
                f"({found} or (jsonb_typeof({x}) = 'array' and exists "
                f"(select 1 from jsonb_array_elements({x}) as e(v) where e.v = any({values}))))"
            )
        return found if op == "in" else f"({x} is not null and not {found})"
    if op in ("contains", "icontains"):
        if not isinstance(operand, str):
            raise FilterError(where, f"{op} takes a text, got {json.dumps(operand)[:80]}")
        text = f"({x} #>> '{{}}')"
        needle = bind(operand, "text")
        if op == "icontains":
            text, needle = f"lower({text})", f"lower({needle})"
        return f"(jsonb_typeof({x}) = 'string' and strpos({text}, {needle}) > 0)"
    raise FilterError(where, f"unknown operator {op!r} ({', '.join(OPERATORS)})")


def text_condition(
    x: str, op: str, operand: Any, bind: Bound, where: str, *, column: str | None = None
) -> str:
    """The condition on the text `x` (SQL null when absent). eq and in compare `column` when given (an
    indexed column whose value `x` is, where x is not null), so an index serves them."""

    def text_of(value: Any) -> str:
        if isinstance(value, float) and value.is_integer():  # JSON's 7.0 is the integer 7
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise FilterError(where, f"{op} takes a text here, got {json.dumps(value)[:80]}")
        return str(value)

    if op == EXISTS:
        return f"({x} is not null)"
    if op in ("eq", "in"):
        values = [text_of(v) for v in (_listed(op, operand, where) if op == "in" else [operand])]
        listed = bind(values, "text[]")
        return f"({column} = any({listed}) and {x} is not null)" if column else f"({x} = any({listed}))"
    if op in ("ne", "nin"):
        values = [text_of(v) for v in (_listed(op, operand, where) if op == "nin" else [operand])]
        return f"({x} is not null and not ({x} = any({bind(values, 'text[]')})))"
    if op in RANGE:
        return f"""({x} collate "C" {RANGE[op]} {bind(text_of(operand), "text")})"""
    if op in ("contains", "icontains"):
        needle = bind(text_of(operand), "text")
        if op == "icontains":
            return f"(strpos(lower({x}), lower({needle})) > 0)"
        return f"(strpos({x}, {needle}) > 0)"
    raise FilterError(where, f"unknown operator {op!r} ({', '.join(OPERATORS)})")


def time_condition(x: str, op: str, operand: Any, bind: Bound, where: str) -> str:
    """The condition on the timestamptz `x`: an ISO 8601 operand (a time without offset is UTC)."""
    if op == EXISTS:
        return f"({x} is not null)"
    signs = {"eq": "=", "ne": "<>", **RANGE}
    if op not in signs:
        raise FilterError(where, f"a time takes eq, ne, gt, gte, lt, lte or '*', not {op!r}")
    try:
        when = datetime.fromisoformat(_rfc3339(str(operand)))
    except ValueError:
        raise FilterError(where, f"{op} takes an ISO 8601 time, got {json.dumps(operand)[:80]}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return f"({x} {signs[op]} {bind(when, 'timestamptz')})"


def _rfc3339(text: str) -> str:
    """An RFC 3339 time as datetime.fromisoformat reads it (a leap second is its minute's second 59)."""
    found = RFC3339_REST.match(text)
    if found is None:
        return text
    day, minute, leap, rest = found.groups()
    zone = "Z" if text.endswith(("z", "Z")) else ""
    return f"{day}T{minute}{':59' if leap else ''}{rest}{zone}"
