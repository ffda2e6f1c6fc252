"""The drop-in mappings as a library: how mem0's memories and LangGraph store items are strataflow entries of
the one L2 API (strataflow.memory.api). The /mem0 routes, the /v1/store routes and `strataflow import
--from-mem0` call these functions, so a memory has one name and one filter grammar whichever way it came in.
Scores are not mapped here (the retrieval ranking's score is the one every surface returns).

mem0 (docs/integrations.md, "What is mapped"):
- user_id -> the subject, agent_id -> the item's agent, run_id -> `metadata.conversation_id`, app_id ->
  `metadata.app_id` (both hidden from the metadata mem0 shows), memory -> the content;
- a memory's entry name is its text (`mem0_entry_name`; long texts: their start and a hash), so the same text
  stored twice for a user and agent is one memory, imported or added;
- filters: `Filter` (parse_filters), the fields user_id, agent_id, run_id, app_id and metadata.

LangGraph store: `store_entry_name` (labels and key escaped, so "/" in a key never meets a deeper namespace),
`store_text` (what is embedded: the value, or the fields an `index` names), and `value_matches`, the one
evaluator of value conditions (the store's `filter` and mem0's `metadata` filter).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from strataflow.memory.item_fields import MAX_CONTENT_CHARS, MAX_NAME_CHARS
from strataflow.memory.item_sets import APP_KEY, CONVERSATION_KEY

HIDDEN_KEYS = (CONVERSATION_KEY, APP_KEY)  # mem0's entity ids, shown as fields rather than metadata

# ---------------------------------------------------------------------------------------------------- mem0
IDENTITY_FIELDS = ("user_id", "agent_id", "run_id", "app_id")
FILTER_FIELDS = (*IDENTITY_FIELDS, "metadata")
MAX_CLAUSES = 64  # alternatives of one filter once its AND / OR are expanded
# (user, agent) pairs a filter may name in all: each is a search (or a list) the request runs; run, app and
# metadata conditions only narrow what those return
MAX_FILTER_COMBINATIONS = 50
ANY: frozenset[str] = frozenset({"*"})  # the wildcard: any non-null value


class FilterError(ValueError):
    """A filter strataflow does not support (HTTP 400, naming the part)."""


class FilterTooLarge(FilterError):
    """A filter that names more combinations than MAX_FILTER_COMBINATIONS (HTTP 422, naming the limit)."""


def mem0_entry_name(text: str) -> str:
    """The entry name of a mem0 memory's text: the text itself, or its start and a hash when too long."""
    text = " ".join(text.split())
    if len(text) <= MAX_NAME_CHARS:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return f"{text[: MAX_NAME_CHARS - 16].rstrip()} … {digest}"


def mem0_text(content: str, statement: str | None, source: str) -> str:
    """What mem0 shows as a memory: its text as written, or, for an extracted item (whose value may be a
    bare "Lisbon"), the statement it rests on, a sentence."""
    if source == "extracted" and statement and statement.strip():
        return statement
    return content


def mem0_metadata(
    metadata: Mapping[str, Any] | None, run_id: str | None, app_id: str | None
) -> dict[str, Any]:
    """The metadata a mem0 memory is stored with: the caller's, and its run and app when given."""
    stored = {k: v for k, v in (metadata or {}).items() if k not in HIDDEN_KEYS}
    if run_id is not None:
        stored[CONVERSATION_KEY] = run_id
    if app_id is not None:
        stored[APP_KEY] = app_id
    return stored


def shown_metadata(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """The metadata mem0 shows: the stored one without the entity ids (run and app are fields)."""
    shown = {k: v for k, v in metadata.items() if k not in HIDDEN_KEYS}
    return shown or None


def app_of(metadata: Mapping[str, Any]) -> str | None:
    found = metadata.get(APP_KEY)
    return found if isinstance(found, str) else None


@dataclass(frozen=True)
class Clause:
    """One conjunction: field -> allowed values (ANY: any non-null value; an absent field is open), and the
    metadata conditions (value_matches' grammar) the item's metadata must meet."""

    allowed: dict[str, frozenset[str]] = field(default_factory=dict)
    metadata: tuple[tuple[str, Any], ...] = ()

    def values(self, name: str) -> frozenset[str] | None:
        """The finite set of values the clause allows for a field, or None when it leaves it open."""
        found = self.allowed.get(name)
        return None if found is None or found == ANY else found

    def pairs(self) -> set[tuple[str | None, str | None]]:
        """The (user, agent) pairs the clause names (None: left open)."""
        open_field: list[str | None] = [None]
        users: list[str | None] = [*sorted(self.values("user_id") or [])] or open_field
        agents: list[str | None] = [*sorted(self.values("agent_id") or [])] or open_field
        return {(user, agent) for user in users for agent in agents}


@dataclass(frozen=True)
class Filter:
    clauses: tuple[Clause, ...]

    def names(self, field_name: str) -> bool:
        """Whether every clause restricts the field (to values, or to any non-null value)."""
        return all(field_name in clause.allowed for clause in self.clauses)

    def identified(self) -> bool:
        """Whether every clause names at least one entity (a delete needs one: it never means everything)."""
        return all(clause.allowed for clause in self.clauses)

    def matches(self, record: Mapping[str, Any]) -> bool:
        """Whether an item's fields (user_id, agent_id, run_id, app_id, metadata) satisfy a clause."""
        return any(_satisfies(clause, record) for clause in self.clauses)

    def scopes(self) -> list[tuple[str | None, frozenset[str] | None]]:
        """(subject or None for the whole namespace, the agents the clause names or None) per clause."""
        found: list[tuple[str | None, frozenset[str] | None]] = []
        for clause in self.clauses:
            users = clause.values("user_id")
            for user in [None] if users is None else sorted(users):
                pair = (user, clause.values("agent_id"))
                if pair not in found:
                    found.append(pair)
        return found


def parse_filters(filters: Mapping[str, Any] | None, **top_level: str | None) -> Filter:
    """The Filter of mem0's `filters` AND the top-level entity ids given (None values are left out): a field
    is a value (equality), {"eq": v}, {"in": [...]} or "*"; `metadata` an object of fields, each a value,
    {"eq": v} or {"in": [...]}; combined in one object (AND) or with AND / OR lists. FilterTooLarge when it
    names more than MAX_FILTER_COMBINATIONS (user, agent) pairs in all (each a search the request runs)."""
    parts: list[Any] = [{name: value} for name, value in top_level.items() if value is not None]
    if filters:
        parts.append(dict(filters))
    clauses = _dnf({"AND": parts}, "filters") if parts else [Clause()]
    total = len(set().union(*(clause.pairs() for clause in clauses)))
    if total > MAX_FILTER_COMBINATIONS:
        raise FilterTooLarge(
            f"the filter names {total} (user_id, agent_id) combinations, each a search; at most "
            f"{MAX_FILTER_COMBINATIONS} per request (split it into several requests)"
        )
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
                branch = [clause for part in parts for clause in part]
            else:
                branch = [Clause()]
                for part in parts:
                    branch = _and(branch, part)
        elif key in IDENTITY_FIELDS:
            branch = [Clause({key: _condition(value, f"{where}.{key}")})]
        elif key == "metadata":
            branch = [Clause(metadata=_metadata_conditions(value, f"{where}.metadata"))]
        elif key == "NOT":
            raise FilterError(f"{where}.NOT: not supported (use AND, OR, eq and in)")
        else:
            raise FilterError(
                f"{where}.{key}: not a supported filter field ({', '.join(FILTER_FIELDS)}, AND, OR)"
            )
        result = _and(result, branch)
        if len(result) > MAX_CLAUSES:
            raise FilterTooLarge(f"{where}: the filter expands to more than {MAX_CLAUSES} alternatives")
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


def _metadata_conditions(value: Any, where: str) -> tuple[tuple[str, Any], ...]:
    """mem0's metadata filter ({"key": v, "key": {"eq": v} | {"in": [...]}}) in value_matches' grammar."""
    if not isinstance(value, Mapping) or not value:
        raise FilterError(
            f"{where}: an object of metadata fields, each a value, {{'eq': v}} or {{'in': [...]}}"
        )
    found: list[tuple[str, Any]] = []
    for name, condition in value.items():
        if isinstance(condition, Mapping):
            if len(condition) != 1 or next(iter(condition)) not in ("eq", "in"):
                raise FilterError(f"{where}.{name}: only a value, {{'eq': v}} or {{'in': [...]}}")
            op, operand = next(iter(condition.items()))
            if op == "in" and not isinstance(operand, list):
                raise FilterError(f"{where}.{name}.in: a list of values")
            found.append((str(name), {f"${op}": operand}))
        else:
            found.append((str(name), condition))
    return tuple(found)


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
            combined.append(Clause(allowed, a.metadata + b.metadata))
    return combined


def _satisfies(clause: Clause, record: Mapping[str, Any]) -> bool:
    for name, values in clause.allowed.items():
        value = record.get(name)
        if value is None or (values != ANY and value not in values):
            return False
    return not clause.metadata or value_matches(record.get("metadata") or {}, dict(clause.metadata))


# ------------------------------------------------------------------------------------- value conditions
COMPARE = {
    "$eq": lambda a, b: a == b, "$ne": lambda a, b: a != b, "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b, "$lt": lambda a, b: a < b, "$lte": lambda a, b: a <= b,
    "$in": lambda a, b: a in b, "$nin": lambda a, b: a not in b,
}  # fmt: skip


def value_matches(value: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """Whether a JSON object's fields (dotted paths) meet the conditions: a value (equality) or operators
    ($eq, $ne, $gt, $gte, $lt, $lte, $in, $nin). The one evaluator of the store's `filter` and mem0's
    metadata filter."""
    for path, condition in wanted.items():
        actual: Any = value
        for part in path.split("."):
            actual = actual.get(part) if isinstance(actual, Mapping) else None
        operators = isinstance(condition, Mapping) and condition and all(op in COMPARE for op in condition)
        tests = condition.items() if operators else [("$eq", condition)]
        for operator, operand in tests:
            try:
                if not COMPARE[operator](actual, operand):
                    return False
            except TypeError:  # incomparable types (a text against a number): no match
                return False
    return True


# ----------------------------------------------------------------------------------------- LangGraph store
def store_entry_name(namespace: Sequence[str], key: str, subject_at: int) -> str:
    """The entry name of a store item: the labels other than the user's and the key, each escaped ("%" and
    "/" as %25 and %2F) and joined by "/", so a key holding "/" is never a deeper namespace's name; with a
    hash when long (the item's metadata keeps the namespace and key as given)."""
    labels = [label for i, label in enumerate(namespace) if i != subject_at]
    name = "/".join(part.replace("%", "%25").replace("/", "%2F") for part in [*labels, key])
    if len(name) <= MAX_NAME_CHARS:
        return name
    return f"{name[: MAX_NAME_CHARS - 14]} #{hashlib.sha256(name.encode()).hexdigest()[:12]}"


def store_text(value: Mapping[str, Any], fields: Sequence[str] | None = None) -> str:
    """What a store item's statement (and so its embedding) is: the `index` fields given (dotted paths), else
    the value's `content` text, else its fields as `name: value`."""
    if fields:
        picked: dict[str, Any] = {}
        for path in fields:
            actual: Any = value
            for part in path.split("."):
                actual = actual.get(part) if isinstance(actual, Mapping) else None
            if actual is not None and path != "$":
                picked[path] = actual
        if "$" in fields:
            picked = dict(value)
        if len(picked) == 1 and isinstance(next(iter(picked.values())), str):
            return str(next(iter(picked.values())))[:MAX_CONTENT_CHARS]
        value = picked
    content = value.get("content")
    if isinstance(content, str) and content.strip():
        return content[:MAX_CONTENT_CHARS]
    shown = {k: v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for k, v in value.items()}
    text = "; ".join(f"{k}: {v}" for k, v in shown.items())
    return text[:MAX_CONTENT_CHARS] if text.strip() else "{}"


# ------------------------------------------------------------------------------------------ filters in SQL
def filter_sql(wanted: Filter, viewer: str | None, alias: str = "mi") -> tuple[str, dict[str, Any]]:
    """The filter as a SQL condition on memory_items `alias` (and its parameters), for a request reading as
    `viewer` (the key's agent, or None): each clause's fields, the run by metadata or lineage, the app and
    metadata conditions; an open agent field reads what the viewer may see, named agents their own items
    (the caller has checked it may act as them). So get_all counts and pages in SQL."""
    params: dict[str, Any] = {"filter_viewer": viewer}
    ors: list[str] = []
    for n, clause in enumerate(wanted.clauses):
        ands: list[str] = []
        for name, column in (("user_id", f"{alias}.subject_id"), ("agent_id", f"{alias}.agent_id")):
            values = clause.values(name)
            if values is not None:
                params[f"{name}_{n}"] = sorted(values)
                ands.append(f"{column} = any(cast(:{name}_{n} as text[]))")
            elif name in clause.allowed:  # "*": any non-null value
                ands.append(f"{column} is not null")
        if clause.values("agent_id") is None:
            ands.append(
                f"strataflow_item_visible({alias}.agent_id, {alias}.is_shared, cast(:filter_viewer as text))"
            )
        if "run_id" in clause.allowed:
            runs = clause.values("run_id")
            params[f"run_{n}"] = None if runs is None else sorted(runs)
            runs_sql = f"cast(:run_{n} as text[]) is null"
            ands.append(
                f"""(({alias}.metadata ? '{CONVERSATION_KEY}' and ({runs_sql}
                    or {alias}.metadata ->> '{CONVERSATION_KEY}' = any(cast(:run_{n} as text[]))))
                 or exists (select 1 from message_keys as k
                    where k.message_id = any({alias}.source_message_ids) and k.namespace = {alias}.namespace
                        and ({runs_sql} or k.conversation_id = any(cast(:run_{n} as text[])))))"""
            )
        if "app_id" in clause.allowed:
            apps = clause.values("app_id")
            params[f"app_{n}"] = None if apps is None else sorted(apps)
            ands.append(
                f"({alias}.metadata ->> '{APP_KEY}' is not null and (cast(:app_{n} as text[]) is null "
                f"or {alias}.metadata ->> '{APP_KEY}' = any(cast(:app_{n} as text[]))))"
            )
        for m, (name, condition) in enumerate(clause.metadata):
            options = condition["$in"] if isinstance(condition, Mapping) and "$in" in condition else [
                condition["$eq"] if isinstance(condition, Mapping) and "$eq" in condition else condition
            ]  # fmt: skip
            params[f"meta_{n}_{m}"] = [json.dumps({name: option}) for option in options]
            ands.append(
                f"exists (select 1 from unnest(cast(:meta_{n}_{m} as text[])) as o(v) "
                f"where {alias}.metadata @> cast(o.v as jsonb))"
            )
        ors.append("(" + (" and ".join(ands) or "true") + ")")
    return "(" + (" or ".join(ors) or "false") + ")", params  # no clause (an empty OR): nothing
