"""mem0's filter grammar, as mem0 OSS (mem0ai 2.2.1, Memory.search / get_all and its vector stores) and mem0's
platform read it, compiled to one SQL condition on memory_items (strataflow.adapters.conditions).

A filter is an object whose keys are ANDed:
- the entity ids `user_id`, `agent_id`, `run_id`, `app_id`; the item times `created_at`, `updated_at`; the
  memory's `categories`;
- `metadata`, an object of metadata fields (the platform's form), or any other key: a metadata field
  (mem0 OSS's flat form, {"user_id": "u", "topic": "music"});
- `AND`, `OR`, `NOT`: lists of filters (NOT: none of them holds).
A field's condition is a value (equality), "*" (any value), a list (one of them) or an object of operators
(eq, ne, gt, gte, lt, lte, in, nin, contains, icontains; several are ANDed); a metadata field's values are
JSON scalars (null too, in eq, ne, in and nin), no text anywhere holds NUL. The top-level ids of a request
(`delete_all(user_id=...)`, an older client's search) are ANDed with it. Bounds (FilterTooLarge, 422): at most
MAX_DEPTH levels of filters (the request's own, and those of its AND / OR / NOT lists), FILTER_KEYS and
METADATA_KEYS keys at each, MAX_PARTS filters a list, MAX_OPERATORS operators a condition.
strataflow.service.mem0_filter_schema states exactly this grammar as the OpenAPI document's JSON schema.

What a memory's fields are in SQL (alias `a`): user_id its subject unless the subject is an entity's own
(`entity_subject`: a memory of an agent or a run alone), agent_id its agent, run_id `RUN_SQL`, app_id and
metadata `META_SQL` (the item's metadata over the metadata of the mem0 add its messages came from).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from strataflow.adapters.conditions import (
    EXISTS,
    OPERATORS,
    Bound,
    FilterError,
    FilterTooLarge,
    json_condition,
    text_condition,
    time_condition,
)

CONVERSATION_KEY = "conversation_id"  # metadata field of a memory added with a run_id (mem0's run)
APP_KEY = "app_id"  # metadata field of a memory added with an app_id
IDENTITY_FIELDS = ("user_id", "agent_id", "run_id", "app_id")
TIME_FIELDS = ("created_at", "updated_at")
LOGIC = {"AND": "and", "OR": "or", "NOT": "not"}
MAX_DEPTH = 2  # the request's filter and the filters of its AND / OR / NOT lists
FILTER_KEYS = (8, 4)  # keys of a filter at depth 1, 2 (its logic keys and `metadata` included)
METADATA_KEYS = (8, 4)  # fields of a `metadata` object in a filter at depth 1, 2
MAX_PARTS = 5  # filters of one AND / OR / NOT list
MAX_OPERATORS = 2  # operators of one condition ({"gte": 2, "lt": 5})
MAX_CONDITIONS = 256  # more than those bounds allow (238, with a request's four top-level ids): a safety net
SOURCE = "mem0"  # the L1 source of the messages of an infer=true add (their keys: "<event id>:<position>")
ENTITY_SUBJECT = "mem0/"  # subjects of memories with no user: "mem0/agent/<id>", "mem0/run/<id>"

# The subject as mem0's user_id: none for an entity's own subject (no user id holds "/": SAFE_ID).
USER_SQL = "(case when strpos({a}.subject_id, '/') = 0 then {a}.subject_id end)"
# The run of a memory: the run it was added with, else the one conversation of the messages it came from (a
# mem0 add without run_id writes its messages to a conversation of its own, "mem0-<event id>": no run).
RUN_SQL = f"""coalesce({{a}}.metadata ->> '{CONVERSATION_KEY}', (
    select min(k.conversation_id) from message_keys as k
    where k.message_id = any({{a}}.source_message_ids) and k.namespace = {{a}}.namespace
        and not (k.source = '{SOURCE}'
                 and k.conversation_id = 'mem0-' || split_part(k.source_message_id, ':', 1))
    having count(distinct k.conversation_id) = 1))"""
# The metadata of a memory: its own, over that of the mem0 add whose messages (still in L1) it was extracted
# from (an add's metadata and app_id reach the memories made of it).
META_SQL = f"""(case when {{a}}.source = 'extracted' and cardinality({{a}}.source_message_ids) > 0 then
    coalesce((select jsonb_object_agg(e.key, e.value order by m.message_id) from conversation_messages as m
              cross join lateral jsonb_each(m.metadata) as e
              where m.namespace = {{a}}.namespace and m.message_id = any({{a}}.source_message_ids)
                  and m.source = '{SOURCE}'), '{{{{}}}}'::jsonb) || {{a}}.metadata
    else {{a}}.metadata end)"""


def entity_subject(agent_id: str | None, run_id: str | None) -> str:
    """The subject of a memory added with no user_id: its agent's, else its run's."""
    return f"{ENTITY_SUBJECT}agent/{agent_id}" if agent_id else f"{ENTITY_SUBJECT}run/{run_id}"


@dataclass(frozen=True)
class Condition:
    """One field's condition: field (an entity id, a time, categories or metadata), the metadata key, the
    operator and operand, and where it was written."""

    field: str
    key: str | None
    op: str
    operand: Any
    where: str


@dataclass(frozen=True)
class Group:
    kind: str  # and, or, not (none of the parts)
    parts: tuple[Group | Condition, ...]


@dataclass(frozen=True)
class Mem0Filter:
    """A parsed filter: `sql` compiles it, the rest says what it names."""

    root: Group

    def identified(self) -> bool:
        """Whether every memory it keeps is named by an entity id (a delete needs one: never everything)."""
        return _identified(self.root)

    def user(self) -> str | None:
        """The one user every memory it keeps belongs to (a top-level user_id equality), or None."""
        for part in _flat_and(self.root):
            if isinstance(part, Condition) and part.field == "user_id" and part.op in ("eq", "in"):
                values = part.operand if part.op == "in" else [part.operand]
                if len(values) == 1 and isinstance(values[0], str):
                    return values[0]
        return None

    def agents(self) -> set[str]:
        """Every agent it names (the caller checks that the request may act as each)."""
        return {str(v) for c in _conditions(self.root) if c.field == "agent_id" for v in _values(c)}

    def visible_agents(self) -> set[str]:
        """The agents whose private memories it may keep (named by eq / in outside a NOT)."""
        return {
            str(v) for c in _conditions(self.root, positive=True) if c.field == "agent_id" for v in _values(c)
        }

    def sql(self, alias: str, bind: Bound) -> str:
        """The condition on memory_items aliased `alias` (its values bound through `bind`)."""
        found = list(_conditions(self.root))
        needs = {c.field for c in found}
        derived = []
        if needs & {"run_id"}:
            derived.append(f"{RUN_SQL.format(a=alias)} as run")
        if needs & {"app_id", "metadata"}:
            derived.append(f"{META_SQL.format(a=alias)} as meta")
        condition = _compile(self.root, alias, bind)
        if not derived:
            return condition
        # the derived fields once per row (offset 0 keeps the planner from inlining them into every use)
        return f"exists (select 1 from (select {', '.join(derived)} offset 0) as m0 where {condition})"


def parse_filters(filters: Mapping[str, Any] | None, **top_level: str | None) -> Mem0Filter:
    """The Mem0Filter of mem0's `filters` AND the top-level entity ids given (None values are left out);
    FilterError names an unsupported part, FilterTooLarge a filter past the bounds."""
    parts: list[Group | Condition] = [
        Condition(name, None, "eq", value, name) for name, value in top_level.items() if value is not None
    ]
    if filters is not None:
        _nul_free(filters, "filters")
        parts.append(_object(filters, "filters", 1))
    root = Group("and", tuple(parts))
    count = sum(1 for _ in _conditions(root))
    if count > MAX_CONDITIONS:
        raise FilterTooLarge("filters", f"{count} conditions; at most {MAX_CONDITIONS} per request")
    return Mem0Filter(root)


def _object(node: Any, where: str, depth: int) -> Group:
    if not isinstance(node, Mapping):
        raise FilterError(where, f"a filter is an object, got {type(node).__name__}")
    if depth > MAX_DEPTH:
        raise FilterTooLarge(where, f"filters nest at most {MAX_DEPTH} levels deep")
    if len(node) > FILTER_KEYS[depth - 1]:
        raise FilterTooLarge(where, f"at most {FILTER_KEYS[depth - 1]} keys in a filter {depth} levels deep")
    parts: list[Group | Condition] = []
    for key, value in node.items():
        here = f"{where}.{key}"
        if key in LOGIC:
            if not isinstance(value, list) or not value:
                raise FilterError(here, f"{key} takes a non-empty list of filters")
            if len(value) > MAX_PARTS:
                raise FilterTooLarge(here, f"{key} takes at most {MAX_PARTS} filters")
            children = tuple(_object(part, f"{here}[{i}]", depth + 1) for i, part in enumerate(value))
            parts.append(Group("or" if LOGIC[key] == "or" else LOGIC[key], children))
        elif key == "metadata":
            if not isinstance(value, Mapping) or not value:
                raise FilterError(here, "an object of metadata fields, each a value or {operator: value}")
            if len(value) > METADATA_KEYS[depth - 1]:
                raise FilterTooLarge(here, f"at most {METADATA_KEYS[depth - 1]} fields here")
            parts.extend(
                c for name, v in value.items() for c in _field("metadata", str(name), v, f"{here}.{name}")
            )
        elif key.startswith("$"):
            raise FilterError(here, f"unknown operator {key!r} (AND, OR, NOT)")
        elif key in (*IDENTITY_FIELDS, *TIME_FIELDS, "categories"):
            parts.extend(_field(key, None, value, here))
        else:  # a metadata field, as mem0 OSS reads any other key
            parts.extend(_field("metadata", key, value, here))
    return Group("and", tuple(parts))


def _nul_free(filters: Mapping[str, Any], where: str) -> None:
    """No key or text of a filter holds NUL (PostgreSQL's text cannot); a loop, however deep the JSON."""
    stack: list[tuple[Any, str]] = [(filters, where)]
    while stack:
        node, here = stack.pop()
        if isinstance(node, str) and "\x00" in node:
            raise FilterError(here, "a text holding NUL")
        if isinstance(node, Mapping):
            stack.extend((key, here) for key in node)
            stack.extend((value, f"{here}.{key}") for key, value in node.items())
        elif isinstance(node, list):
            stack.extend((value, f"{here}[{i}]") for i, value in enumerate(node))


def _json_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _field(name: str, key: str | None, value: Any, where: str) -> list[Condition]:
    if isinstance(value, Mapping):
        if not value:
            raise FilterError(where, "an empty condition object")
        unknown = [op for op in value if op not in OPERATORS]
        if unknown:
            raise FilterError(where, f"unknown operator {unknown[0]!r} ({', '.join(OPERATORS)})")
        if len(value) > MAX_OPERATORS:
            raise FilterTooLarge(where, f"at most {MAX_OPERATORS} operators in one condition")
        if name == "metadata":  # JSON scalars, null included (an object or a list is no metadata value)
            for op, operand in value.items():
                values = operand if op in ("in", "nin") and isinstance(operand, list) else [operand]
                if not all(_json_scalar(v) for v in values):
                    raise FilterError(f"{where}.{op}", "a metadata condition compares JSON scalars")
        return [Condition(name, key, str(op), operand, f"{where}.{op}") for op, operand in value.items()]
    if value == "*":
        return [Condition(name, key, EXISTS, None, where)]
    if isinstance(value, list):
        if name == "metadata" and not all(_json_scalar(v) for v in value):
            raise FilterError(where, "a metadata condition compares JSON scalars")
        return [Condition(name, key, "in", value, where)]
    if value is None:
        raise FilterError(where, "a value, '*', a list or {operator: value}; null matches nothing")
    return [Condition(name, key, "eq", value, where)]


def _compile(node: Group | Condition, a: str, bind: Bound) -> str:
    if isinstance(node, Condition):
        return f"coalesce({_leaf(node, a, bind)}, false)"  # an absent field is false, never null
    parts = [_compile(part, a, bind) for part in node.parts]
    if node.kind == "not":
        return f"not ({' or '.join(parts)})"
    joined = f" {node.kind} ".join(parts)
    return f"({joined})" if parts else "true"


def _leaf(c: Condition, a: str, bind: Bound) -> str:
    if c.field == "user_id":
        return text_condition(USER_SQL.format(a=a), c.op, c.operand, bind, c.where, column=f"{a}.subject_id")
    if c.field == "agent_id":
        return text_condition(f"{a}.agent_id", c.op, c.operand, bind, c.where)
    if c.field == "run_id":
        return text_condition("m0.run", c.op, c.operand, bind, c.where)
    if c.field == "app_id":
        return text_condition(f"(m0.meta ->> '{APP_KEY}')", c.op, c.operand, bind, c.where)
    if c.field in TIME_FIELDS:
        return time_condition(f"{a}.{c.field}", c.op, c.operand, bind, c.where)
    if c.field == "categories":  # a memory's categories are its one category: contains is membership
        op = {"contains": "eq", "icontains": "eq"}.get(c.op, c.op)
        return text_condition(f"{a}.category", op, c.operand, bind, c.where)
    return json_condition(f"(m0.meta -> {bind(c.key, 'text')})", c.op, c.operand, bind, c.where, members=True)


def _conditions(node: Group | Condition, positive: bool = False) -> list[Condition]:
    if isinstance(node, Condition):
        return [node] if not positive or node.op in ("eq", "in") else []
    if positive and node.kind == "not":
        return []
    return [c for part in node.parts for c in _conditions(part, positive)]


def _values(c: Condition) -> list[Any]:
    if c.op == "in" and isinstance(c.operand, list):
        return c.operand
    return [c.operand] if c.op in ("eq", "ne") else c.operand if isinstance(c.operand, list) else []


def _flat_and(node: Group) -> list[Group | Condition]:
    if node.kind != "and":
        return []
    return [p for part in node.parts for p in (_flat_and(part) if isinstance(part, Group) else [part])]


def _identified(node: Group | Condition) -> bool:
    if isinstance(node, Condition):
        return node.field in IDENTITY_FIELDS and node.op in ("eq", "in", EXISTS)
    if node.kind == "and":
        return any(_identified(part) for part in node.parts)
    if node.kind == "or":
        return bool(node.parts) and all(_identified(part) for part in node.parts)
    return False
