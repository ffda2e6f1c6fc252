"""mem0's entity filters (`filters=` of search and get_all), read into what strataflow can answer.

Supported: the fields user_id (-> subject), agent_id (-> agent), run_id (-> conversation) and app_id (-> the
namespace: it matches the key's namespace only); a field's
condition is a value (equality), {"eq": v}, {"in": [v, ...]} or "*" (any value); conditions combine by
listing several fields in one object (AND) or with {"AND": [...]} and {"OR": [...]}, nested. Anything else
(other fields, NOT, ne/gt/contains/... operators) is refused with HTTP 400 naming it, never ignored: by the
request model (strataflow.service.mem0_schemas.Mem0Filter) or here (FilterError).

A filter is planned as its disjunctive normal form: a few clauses, each a set of allowed values per field.
The route runs one search (or list) per (subject, agent) pair the clauses name (namespace-wide where a clause
leaves the user open) and keeps the items the filter matches (`matches`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

FIELDS = ("user_id", "agent_id", "run_id", "app_id")  # app_id: the namespace (mem0's app)
MAX_CLAUSES = 256
MAX_SCOPES = 50
ANY: frozenset[str] = frozenset({"*"})  # the wildcard: any non-null value


class FilterError(ValueError):
    """A filter strataflow does not support (HTTP 400, naming the part)."""


@dataclass(frozen=True)
class Clause:
    """One conjunction: field -> allowed values (ANY: any non-null value); an absent field is open."""

    allowed: dict[str, frozenset[str]] = field(default_factory=dict)

    def values(self, name: str) -> frozenset[str] | None:
        """The finite set of values the clause allows for a field, or None when it leaves it open."""
        found = self.allowed.get(name)
        return None if found is None or found == ANY else found


@dataclass(frozen=True)
class Filter:
    clauses: tuple[Clause, ...]

    def mentions(self, name: str) -> bool:
        return any(name in clause.allowed for clause in self.clauses)

    def matches(self, record: Mapping[str, str | None]) -> bool:
        """Whether an item's fields (user_id, agent_id, run_id) satisfy one of the clauses."""
        return any(_satisfies(clause, record) for clause in self.clauses)

    def scopes(self) -> list[tuple[str | None, frozenset[str] | None]]:
        """(subject or None for the whole namespace, the agents the clause names or None) per clause."""
        found: list[tuple[str | None, frozenset[str] | None]] = []
        for clause in self.clauses:
            users = clause.values("user_id")
            subjects: list[str | None] = [None] if users is None else [*sorted(users)]
            for user in subjects:
                pair = (user, clause.values("agent_id"))
                if pair not in found:
                    found.append(pair)
        if len(found) > MAX_SCOPES:
            raise FilterError(f"the filter names {len(found)} user/agent scopes; at most {MAX_SCOPES}")
        return found


def parse_filters(filters: Mapping[str, Any] | None, **top_level: str | None) -> Filter:
    """The Filter of mem0's `filters` AND the top-level entity ids given (None values are left out)."""
    parts: list[Any] = [{name: value} for name, value in top_level.items() if value is not None]
    if filters:
        parts.append(dict(filters))
    clauses = _dnf({"AND": parts}, "filters") if parts else [Clause()]
    return Filter(tuple(clauses))


def _dnf(node: Any, where: str) -> list[Clause]:
    if not isinstance(node, Mapping):
        raise FilterError(f"{where}: a filter is an object, got {type(node).__name__}")
    result = [Clause()]
    for key, value in node.items():
        if key in ("AND", "OR"):
            if not isinstance(value, list):
                raise FilterError(f"{where}.{key}: a list of filters, got {type(value).__name__}")
            parts = [_dnf(part, f"{where}.{key}[{i}]") for i, part in enumerate(value)]
            if key == "OR":
                branch = [clause for part in parts for clause in part] if parts else []
            else:
                branch = [Clause()]
                for part in parts:
                    branch = _and(branch, part)
        elif key in FIELDS:
            branch = [Clause({key: _condition(value, f"{where}.{key}")})]
        elif key == "NOT":
            raise FilterError(f"{where}.NOT: not supported (use AND, OR, eq and in)")
        else:
            raise FilterError(f"{where}.{key}: not a supported filter field (user_id, agent_id, run_id)")
        result = _and(result, branch)
        if len(result) > MAX_CLAUSES:
            raise FilterError(f"{where}: the filter expands to more than {MAX_CLAUSES} alternatives")
    return result


def _condition(value: Any, where: str) -> frozenset[str]:
    if isinstance(value, str):
        return ANY if value == "*" else frozenset({value})
    if isinstance(value, Mapping) and len(value) == 1:
        op, operand = next(iter(value.items()))
        if op == "eq" and isinstance(operand, str):
            return ANY if operand == "*" else frozenset({operand})
        if op == "in" and isinstance(operand, list) and operand and all(isinstance(v, str) for v in operand):
            return frozenset(operand)
        if op not in ("eq", "in"):
            raise FilterError(f"{where}: operator {op!r} is not supported (eq, in or '*')")
    raise FilterError(f"{where}: a text value, {{'eq': text}}, {{'in': [text, ...]}} or '*'")


def _and(left: list[Clause], right: list[Clause]) -> list[Clause]:
    combined = []
    for a in left:
        for b in right:
            allowed = dict(a.allowed)
            for name, values in b.allowed.items():
                mine = allowed.get(name)
                if mine is None or mine == ANY:
                    allowed[name] = values
                elif values != ANY:
                    allowed[name] = mine & values
            combined.append(Clause(allowed))
    return combined


def _satisfies(clause: Clause, record: Mapping[str, str | None]) -> bool:
    for name, values in clause.allowed.items():
        value = record.get(name)
        if value is None or (values != ANY and value not in values):
            return False
    return True
