"""What a LangGraph store item is named and embedded by.

Names: an item is an entry of the user its namespace names (the label at `subject_at`, or the last label of a
shorter namespace; `subject_of` maps a label that is no subject id, e.g. one holding a newline, to one no user
id can be), named by the other labels and the key, each escaped ("%" and "/" as %25 and %2F) and joined by
"/" (`entry_name`), so a key holding "/" is never a deeper namespace's item. The item's metadata keeps the
namespace and key as given.

Texts: LangGraph's field paths (`index=["a", "b.c", "items[*].text", "{x,y}", "$"]`, the grammar of
langgraph.store.base.embed.get_text_at_path: dotted fields, [n] and [-n], [*], *, {f1,f2}, $ the whole value)
each give texts, and each text is one vector (`index_texts`), as PostgresStore embeds them: an item is found
by any one of its indexed fields as well as by that field stored alone. `statement` is the item's one text
(its statement and full text): the indexed texts, or, with no index given, its `content`, else its fields as
`name: value`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from models.messages import SAFE_ID
from strataflow.memory.item_fields import MAX_CONTENT_CHARS, MAX_NAME_CHARS

SUBJECT_ID = re.compile(SAFE_ID)
MAX_SUBJECT_CHARS = 200
LABEL_SUBJECT = "store/"  # the subject of a user label that is no subject id: "store/<label, %-escaped>"
MAX_PATH_TEXTS = 20  # vectors of one item (its indexed texts)


def subject_of(label: str) -> str:
    """The subject id of the label that is the user: the label itself when it is one (no "/" or control
    characters), else LABEL_SUBJECT and the label escaped, with a hash when long (no user id holds "/")."""
    if SUBJECT_ID.match(label) and len(label) <= MAX_SUBJECT_CHARS:
        return label
    escaped = LABEL_SUBJECT + quote(label, safe="")
    if len(escaped) <= MAX_SUBJECT_CHARS:
        return escaped
    return f"{escaped[: MAX_SUBJECT_CHARS - 14]} #{hashlib.sha256(label.encode()).hexdigest()[:12]}"


def subject_position(namespace: Sequence[str], subject_at: int) -> int:
    """Where the user is: the label at subject_at, or the last label of a shorter namespace."""
    return min(subject_at, len(namespace) - 1)


def entry_name(namespace: Sequence[str], key: str, subject_at: int) -> str:
    """The entry name of an item (module docstring), with a hash when long."""
    at = subject_position(namespace, subject_at)
    labels = [label for i, label in enumerate(namespace) if i != at]
    name = "/".join(part.replace("%", "%25").replace("/", "%2F") for part in [*labels, key])
    if len(name) <= MAX_NAME_CHARS:
        return name
    return f"{name[: MAX_NAME_CHARS - 14]} #{hashlib.sha256(name.encode()).hexdigest()[:12]}"


def tokens(path: str) -> list[str]:
    """A field path's tokens: names, "[n]" / "[*]" and "{a,b}" groups, split at dots outside brackets."""
    found: list[str] = []
    current: list[str] = []
    depth, closing = 0, ""
    for char in path:
        if depth:
            current.append(char)
            depth += 1 if char == current[0] else -1 if char == closing else 0
            if depth == 0:
                found.append("".join(current))
                current = []
        elif char in "[{":
            if current:
                found.append("".join(current))
            current, depth, closing = [char], 1, "]" if char == "[" else "}"
        elif char == ".":
            if current:
                found.append("".join(current))
            current = []
        else:
            current.append(char)
    if current:
        found.append("".join(current))
    return found


def texts_at(value: Any, path: str) -> list[str]:
    """The texts a field path gives in a value: a scalar as text, a list or object as sorted JSON."""
    if not path or path == "$":
        return [_text(value)]
    return _walk(value, tokens(path))


def _walk(value: Any, rest: list[str]) -> list[str]:
    if not rest:
        return [] if value is None else [_text(value)]
    token, rest = rest[0], rest[1:]
    if token.startswith("[") and token.endswith("]"):
        if not isinstance(value, list):
            return []
        index = token[1:-1]
        if index == "*":
            return [t for element in value for t in _walk(element, rest)]
        try:
            at = int(index)
        except ValueError:
            return []
        return _walk(value[at], rest) if -len(value) <= at < len(value) else []
    if token.startswith("{") and token.endswith("}"):
        if not isinstance(value, Mapping):
            return []
        return [t for field in token[1:-1].split(",") for t in _walk(value, [*tokens(field.strip()), *rest])]
    if token == "*":
        children = value.values() if isinstance(value, Mapping) else value if isinstance(value, list) else []
        return [t for child in children for t in _walk(child, rest)]
    return _walk(value.get(token), rest) if isinstance(value, Mapping) and token in value else []


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float):
        return str(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def index_texts(value: Mapping[str, Any], fields: Sequence[str]) -> list[str]:
    """The texts of the indexed fields, one vector each (non-empty, distinct, at most MAX_PATH_TEXTS)."""
    found = [t[:MAX_CONTENT_CHARS] for path in fields for t in texts_at(value, path) if t.strip()]
    return list(dict.fromkeys(found))[:MAX_PATH_TEXTS]


def statement(value: Mapping[str, Any], fields: Sequence[str] | None) -> str:
    """An item's one text: its indexed texts (one alone as it is), or with no index its `content` text,
    else its fields as `name: value`."""
    if fields is not None:
        picked = index_texts(value, fields)
        return "\n".join(picked)[:MAX_CONTENT_CHARS] if picked else _fields_text(value)
    content = value.get("content")
    if isinstance(content, str) and content.strip():
        return content[:MAX_CONTENT_CHARS]
    return _fields_text(value)


def _fields_text(value: Mapping[str, Any]) -> str:
    text = "; ".join(f"{k}: {_text(v)}" for k, v in value.items())
    return text[:MAX_CONTENT_CHARS] if text.strip() else "{}"
