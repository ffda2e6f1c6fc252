"""L2 -> seed 002 content: which memory items fill which field of the user and work documents.

A document is a view of the subject's active L2 items (hot summaries left out, and only items every agent may
see: no agent, or shared). Each entry keeps its item's provenance in `meta` {source, confidence,
last_updated_at}. The mapping (docs/protocols.md lists it too):

user document (UserMemoryContent)
- occupation <- job_title; timezone <- timezone; primary_language <- primary_language
- people[] <- person_<name> items whose role is personal or absent (relationship from the role: 妻子, friend),
  and the family keys spouse, children, family_members (an unnamed member is named by its relationship)
- places[] <- location (category home), hometown (category hometown), place_<name> items
- preferences: language_preference <- languages; location_preference <- target_city; communication_style
  <- a preference item about communication or contact; notification_preference <- one about notifications
- interests <- interests / hobbies; avoid_topics <- avoid_topics; recurring_routines[] <- routine_<name>
work document (WorkProfileContent)
- occupation <- job_title; expertise <- skills; preferred_tools <- tools
- team_members[] <- person_<name> items whose role is a work role (engineer, 经理, leads the data team, ...)
- current_projects[] <- project_<name> / project items and status_<topic> items (status mapped to the seed's
  planned | active | paused | completed, the raw status and progress in notes)
- work_rules <- decision_<topic> items ("database: PostgreSQL (it already runs our analytics)")

Everything else (age, income, intents, feedback, ...) has no place in seed 002: it stays in L2 and in the seed
000 summary (strataflow.memory.user_memory).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection, text

from models.profiles import (
    Person,
    Place,
    Project,
    RecurringRoutine,
    TeamMember,
    UserMemoryContent,
    WorkProfileContent,
)
from strataflow.memory.api import NAMESPACE_VISIBLE
from strataflow.textsearch import CJK_RUN

SELECT_PROFILE_ITEMS = text(
    f"""
    select item_id, kind, key, value, statement, source, confidence, updated_at
    from memory_items
    where namespace = :namespace and subject_id = :subject_id and status = 'active'
        and kind <> 'hot_summary' and {NAMESPACE_VISIBLE}
    order by updated_at, item_id
    """
)

PERSONAL = re.compile(
    r"\b(wife|husband|spouse|partner|girlfriend|boyfriend|fianc[ée]e?|friend|mother|father|mom|mum|dad|"
    r"parents?|sons?|daughters?|child|children|kids?|brother|sister|sibling|cousin|aunt|uncle|grand\w*|"
    r"neighbou?r|roommate|family)\b"
    r"|妻子|老婆|太太|丈夫|老公|先生|爱人|配偶|对象|女朋友|男朋友|朋友|闺蜜|妈妈|母亲|爸爸|父亲|父母|儿子|女儿|孩子|"
    r"哥哥|姐姐|弟弟|妹妹|兄弟|姐妹|爷爷|奶奶|外公|外婆|亲戚|邻居|室友|家人",
    re.IGNORECASE,
)
PROJECT_STATUS = {
    "done": "completed",
    "completed": "completed",
    "finished": "completed",
    "in_progress": "active",
    "in_review": "active",
    "on_track": "active",
    "delayed": "active",
    "blocked": "active",
    "active": "active",
    "paused": "paused",
    "on_hold": "paused",
    "cancelled": "paused",
    "planned": "planned",
    "not_started": "planned",
}
PREFERENCE_SLOTS = (
    (
        "communication_style",
        re.compile(r"communicat|contact|reply|repl|answer|style|tone|沟通|联系|回复|风格"),
    ),
    ("notification_preference", re.compile(r"notif|alert|remind|通知|提醒")),
    ("work_lifestyle", re.compile(r"lifestyle|work_life|remote|office|作息|办公")),
)


def load_items(conn: Connection, namespace: str, subject_id: str) -> list[Any]:
    """The subject's active, agent-visible items (oldest first: for a repeated slot the newest wins)."""
    return list(conn.execute(SELECT_PROFILE_ITEMS, {"namespace": namespace, "subject_id": subject_id}))


def derive_contents(items: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """{"user": UserMemoryContent JSON, "work": WorkProfileContent JSON} built from L2 items."""
    user: dict[str, Any] = {"people": {}, "places": {}, "recurring_routines": {}, "preferences": {}}
    work: dict[str, Any] = {"team_members": {}, "current_projects": {}, "work_rules": {}}
    for item in items:
        _place_item(item, user, work)
    user_content = {
        **{k: v for k, v in user.items() if k not in ("people", "places", "recurring_routines")},
        "people": _valid(Person, user["people"].values()),
        "places": _valid(Place, user["places"].values()),
        "recurring_routines": _valid(RecurringRoutine, user["recurring_routines"].values()),
    }
    work_content = {
        **{k: v for k, v in work.items() if k not in ("team_members", "current_projects", "work_rules")},
        "team_members": _valid(TeamMember, work["team_members"].values()),
        "current_projects": _valid(Project, work["current_projects"].values()),
        "work_rules": list(work["work_rules"].values()),
    }
    return {
        "user": UserMemoryContent.model_validate(user_content).model_dump(mode="json"),
        "work": WorkProfileContent.model_validate(work_content).model_dump(mode="json"),
    }


def name_key(name: str) -> str:
    """The identity of an entry within its list: its name, case- and space-insensitive."""
    return " ".join(str(name).split()).casefold()


def meta_of(item: Any) -> dict[str, Any]:
    return {
        "source": item.source,
        "confidence": round(float(item.confidence), 3),
        "last_updated_at": item.updated_at.isoformat(),
    }


def _place_item(item: Any, user: dict[str, Any], work: dict[str, Any]) -> None:  # noqa: C901 (a flat table)
    key, value, kind = item.key, item.value, item.kind
    if key == "job_title" and _text(value):
        user["occupation"] = work["occupation"] = _text(value)
    elif key in ("timezone", "primary_language") and _text(value):
        user[key] = _text(value)
    elif key in ("interests", "hobbies"):
        user["interests"] = _merge_list(user.get("interests"), value)
    elif key == "avoid_topics":
        user["avoid_topics"] = _merge_list(user.get("avoid_topics"), value)
    elif key in ("skills", "expertise"):
        work["expertise"] = _merge_list(work.get("expertise"), value)
    elif key in ("tools", "preferred_tools"):
        work["preferred_tools"] = _merge_list(work.get("preferred_tools"), value)
    elif key == "languages":
        user["preferences"]["language_preference"] = _merge_list(None, value)
    elif key == "target_city" and _text(value):
        user["preferences"]["location_preference"] = _text(value)
    elif key in ("location", "hometown") and _text(value):
        category = "home" if key == "location" else "hometown"
        _add(user["places"], {"name": _text(value), "category": category}, item)
    elif key.startswith("place_"):
        _add(user["places"], _named(value, key, "place_"), item)
    elif key.startswith("routine_"):
        _add(user["recurring_routines"], _named(value, key, "routine_"), item)
    elif key.startswith("person_"):
        _place_person(item, user, work)
    elif key in ("spouse", "children", "family_members"):
        for entry in _family(key, value, _is_chinese(item)):
            _add(user["people"], entry, item)
    elif key.startswith("status_") or key == "project" or key.startswith("project_"):
        _add(work["current_projects"], _project(key, value), item)
    elif kind == "decision" and key.startswith("decision_"):
        work["work_rules"][key] = _rule(key, value)
    elif kind == "preference":
        slot = next((name for name, pattern in PREFERENCE_SLOTS if pattern.search(key)), None)
        if slot == "notification_preference":
            user["preferences"][slot] = _merge_list(user["preferences"].get(slot), _text(value))
        elif slot is not None:
            user["preferences"][slot] = _text(value)


def _place_person(item: Any, user: dict[str, Any], work: dict[str, Any]) -> None:
    value = item.value if isinstance(item.value, dict) else {"name": _text(item.value)}
    name = _text(value.get("name")) or item.key.removeprefix("person_").replace("_", " ")
    role = _text(value.get("role")) or None
    relationship = _text(value.get("relationship")) or None
    personal = PERSONAL.search(f"{role or ''} {relationship or ''}")
    entry = {
        "name": name,
        "role": None if personal and not relationship else role,
        "relationship": relationship or (role if personal else None),
        "preferred_contact_channel": _text(value.get("contact") or value.get("preferred_contact_channel"))
        or None,
        "notes": _text(value.get("notes")) or None,
    }
    if personal or not (role or relationship):
        _add(user["people"], entry, item)
    else:
        _add(work["team_members"], {**entry, "relationship": relationship or "colleague"}, item)


def _family(key: str, value: Any, chinese: bool) -> list[dict[str, Any]]:
    relationship = {"spouse": "spouse", "children": "child", "family_members": "family"}[key]
    unnamed = (
        {"spouse": "配偶", "children": "孩子", "family_members": "家人"}[key] if chinese else relationship
    )
    if isinstance(value, bool) or value is None:
        return [{"name": unnamed, "relationship": relationship}] if value else []
    if isinstance(value, int | float):
        count = int(value)
        return [{"name": unnamed, "relationship": relationship, "notes": f"count: {count}"}] if count else []
    members = value if isinstance(value, list) else [value]
    entries = []
    for member in members:
        if isinstance(member, dict):
            name = _text(member.get("name")) or unnamed
            role = _text(member.get("relationship") or member.get("role")) or relationship
            entries.append({"name": name, "relationship": role, "notes": _text(member.get("notes")) or None})
        elif _text(member):
            entries.append({"name": _text(member), "relationship": relationship})
    return entries


def _project(key: str, value: Any) -> dict[str, Any]:
    topic = re.sub(r"^(status|project)_?", "", key).replace("_", " ").strip()
    if not isinstance(value, dict):
        return {"name": _text(value) or topic or key, "notes": None}
    raw = str(value.get("status") or "").strip().lower().replace(" ", "_")
    progress = value.get("progress")
    notes = ", ".join(
        part for part in (raw.replace("_", " "), f"{progress}%" if progress is not None else "") if part
    )
    return {
        "name": _text(value.get("name") or value.get("project") or value.get("about")) or topic or key,
        "description": _text(value.get("description")) or None,
        "status": PROJECT_STATUS.get(raw),
        "notes": notes or None,
    }


def _rule(key: str, value: Any) -> str:
    topic = key.removeprefix("decision_").replace("_", " ")
    if isinstance(value, dict):
        decision, reason = _text(value.get("decision")), _text(value.get("reason"))
        return f"{topic}: {decision}" + (f" ({reason})" if reason else "")
    return f"{topic}: {_text(value)}"


def _named(value: Any, key: str, prefix: str) -> dict[str, Any]:
    entry = dict(value) if isinstance(value, dict) else {"notes": _text(value) or None}
    entry["name"] = _text(entry.get("name")) or key.removeprefix(prefix).replace("_", " ")
    return entry


def _add(entries: dict[str, dict[str, Any]], entry: dict[str, Any], item: Any) -> None:
    """Add or merge an entry by name (later items fill and override the fields they carry)."""
    if not entry.get("name"):
        return
    ident = name_key(entry["name"])
    merged = {**entries.get(ident, {}), **{k: v for k, v in entry.items() if v not in (None, "", [])}}
    merged["meta"] = meta_of(item)
    entries[ident] = merged


def _valid(model: Any, entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Entries that fit the seed's model; the model's unknown fields (an item's extra keys) are dropped."""
    fields = set(model.model_fields)
    valid = []
    for entry in entries:
        try:
            valid.append(model.model_validate({k: v for k, v in entry.items() if k in fields}).model_dump())
        except ValidationError:
            continue  # an item value that does not fit the seed's entry stays in L2 only
    return valid


def _merge_list(current: list[str] | None, value: Any) -> list[str]:
    values = value if isinstance(value, list) else [value]
    merged = list(current or [])
    for entry in values:
        label = _text(entry)
        if label and label not in merged:
            merged.append(label)
    return merged


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, dict):
        prefers, over = value.get("prefers"), value.get("over")
        if prefers:
            return f"{prefers}" + (f" (over {over})" if over else "")
        return ", ".join(_text(v) for v in value.values() if _text(v))
    if isinstance(value, list):
        return ", ".join(_text(v) for v in value if _text(v))
    return json.dumps(value, ensure_ascii=False)


def _is_chinese(item: Any) -> bool:
    return bool(CJK_RUN.search(f"{item.statement or ''} {_text(item.value)}"))
