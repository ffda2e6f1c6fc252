"""Seed 000 memory manager, the L2 side: summarize (the four sections, completeness, a narrative in the
subject's language) and how an item reads in seed 000's answers (memory_content, seed_category).

summarize groups the vocabulary keys into the four seed 000 sections (basic, career, immigration, family),
scores completeness as the share of vocabulary keys filled, and writes the narrative in the language of the
subject's own statements (Chinese for a Chinese conversation). Facts with no place in the seed 002 documents
are here. save_info (extraction of one exchange) is strataflow/pipeline/save_info.py; get_user_context (the
subject's memories ranked for a query) is strataflow/retrieval/user_context.py.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, text

from models.user_memory import Completeness, ProfileSummary, UserProfile
from models.vocabulary import PROFILE_KEYS, PROFILE_SECTIONS, program_category
from strataflow.memory.api import NAMESPACE_VISIBLE
from strataflow.textsearch import detect_lang

SEED_TYPES = {"fact": "FACT", "preference": "PREFERENCE", "intent": "INTENT"}
SUMMARY_MIN_FIELDS = 3
KIND_ORDER = ("fact", "intent", "preference", "observation", "meta", "status")
LABELS_ZH = {
    "name": "姓名", "age": "年龄", "gender": "性别", "location": "所在地", "hometown": "籍贯",
    "nationality": "国籍", "phone": "电话", "email": "邮箱", "languages": "语言", "education": "学历",
    "university": "毕业院校", "major": "专业", "job_title": "职位", "company": "公司", "industry": "行业",
    "years_of_experience": "工作年限", "annual_income": "年收入", "income_currency": "收入币种",
    "skills": "技能", "tools": "工具", "has_tech_background": "科技背景", "target_programs": "目标计划",
    "timeline": "时间规划", "budget": "预算", "investment_amount": "可投资金额",
    "has_hk_employer": "香港雇主", "target_city": "目标城市", "current_visa": "当前签证",
    "language_scores": "语言成绩", "marital_status": "婚姻状况", "children": "子女", "spouse": "配偶",
    "family_members": "家庭成员", "family_support": "家人支持", "birth_year": "出生年份",
    "monthly_income": "月收入", "budget_currency": "预算币种",
}  # fmt: skip
SECTION_LABELS = {
    "zh": {"basic": "基本信息", "career": "职业", "immigration": "移民意向", "family": "家庭"},
    "en": {"basic": "Basic", "career": "Career", "immigration": "Immigration", "family": "Family"},
}
MONEY_KEYS = frozenset({"annual_income", "monthly_income", "budget", "investment_amount"})

SELECT_PROFILE_VALUES = text(
    f"""
    select kind, key, value, statement, metadata from memory_items
    where namespace = :namespace and subject_id = :subject_id and status = 'active'
        and kind <> 'hot_summary' and {NAMESPACE_VISIBLE}
    order by updated_at, item_id
    """
)
SELECT_RECENT_USER_TEXT = text(
    """
    select content from conversation_messages
    where namespace = :namespace and subject_id = :subject_id and role = 'user'
    order by event_at desc limit 20
    """
)


def summarize(conn: Connection, namespace: str, subject_id: str) -> ProfileSummary:
    """Seed 000 summarize: the four sections, completeness and a narrative in the subject's language."""
    rows = list(conn.execute(SELECT_PROFILE_VALUES, {"namespace": namespace, "subject_id": subject_id}))
    values = _profile_values(rows)
    sections = {name: {k: values[k] for k in keys if k in values} for name, keys in PROFILE_SECTIONS.items()}
    ordered = [key for keys in PROFILE_SECTIONS.values() for key in keys]
    filled = [key for key in ordered if key in values]
    missing = [key for key in ordered if key not in values]
    completeness = Completeness(
        score=round(100 * len(filled) / len(ordered)) if ordered else 0,
        filled_fields=filled,
        missing_fields=missing,
    )
    lang = _subject_language(conn, namespace, subject_id, rows)
    return ProfileSummary(
        user_profile=UserProfile(**sections),
        completeness=completeness,
        narrative_summary=_narrative(sections, completeness, lang),
        language=lang,
    )


def memory_content(key: str, value: Any, statement: str | None, lang: str, approximate: bool) -> str:
    """A vocabulary field as "label：value" (年龄：30+), any other item as its statement."""
    if key not in PROFILE_KEYS:
        return statement or f"{key.replace('_', ' ')}: {_value_text(key, value, lang)}"
    shown = _value_text(key, value, lang)
    if approximate:
        shown = ("约" if lang == "zh" else "about ") + shown
    return f"{LABELS_ZH.get(key, key)}：{shown}" if lang == "zh" else f"{key.replace('_', ' ')}: {shown}"


def _value_text(key: str, value: Any, lang: str) -> str:
    if isinstance(value, bool):
        return ("是" if value else "否") if lang == "zh" else ("yes" if value else "no")
    if (
        isinstance(value, int)
        and key in MONEY_KEYS
        and lang == "zh"
        and value >= 10000
        and value % 10000 == 0
    ):
        return f"{value // 10000}万"
    if key == "years_of_experience" and isinstance(value, int | float):
        return f"{value}年" if lang == "zh" else f"{value} years"
    if isinstance(value, list):
        return ("、" if lang == "zh" else ", ").join(_value_text(key, v, lang) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k} {_value_text(key, v, lang)}" for k, v in value.items() if v is not None)
    return str(value)


def seed_category(value: Any) -> str | None:
    """The seed 000 program category the value names (QMAS, GEP, IANG, TTPS, CIES, TECHTAS), if any."""
    values = value if isinstance(value, list) else [value]
    return next((c for c in (program_category(str(v)) for v in values) if c), None)


def _profile_values(rows: list[Any]) -> dict[str, Any]:
    """Vocabulary key -> value; facts win over other kinds, then the newest item."""
    best: dict[str, tuple[int, Any]] = {}
    for row in rows:
        if row.key not in PROFILE_KEYS:
            continue
        rank = KIND_ORDER.index(row.kind) if row.kind in KIND_ORDER else len(KIND_ORDER)
        if row.key not in best or rank <= best[row.key][0]:
            best[row.key] = (rank, row.value)
    return {key: value for key, (_, value) in best.items()}


def _subject_language(conn: Connection, namespace: str, subject_id: str, rows: list[Any]) -> str:
    said = " ".join(row.statement or "" for row in rows)
    if not said.strip():
        params = {"namespace": namespace, "subject_id": subject_id}
        said = " ".join(conn.execute(SELECT_RECENT_USER_TEXT, params).scalars())
    return detect_lang(said) if said.strip() else "en"


def _narrative(sections: dict[str, dict[str, Any]], completeness: Completeness, lang: str) -> str:
    zh = lang == "zh"
    titles = SECTION_LABELS["zh" if zh else "en"]
    parts = []
    for name, fields in sections.items():
        if not fields:
            continue
        shown = [
            f"{LABELS_ZH.get(k, k)}{_value_text(k, v, lang)}"
            if zh
            else f"{k.replace('_', ' ')} {_value_text(k, v, lang)}"
            for k, v in fields.items()
        ]
        parts.append(
            f"{titles[name]}：{'，'.join(shown)}。" if zh else f"{titles[name]}: {', '.join(shown)}."
        )
    missing = completeness.missing_fields[:8]
    if zh:
        head = "".join(parts) or "目前还没有这位用户的资料。"
        tail = f"尚未了解：{'、'.join(LABELS_ZH.get(k, k) for k in missing)}。" if missing else ""
        return f"{head}{tail}（信息完整度 {completeness.score}%）"
    head = " ".join(parts) or "Nothing is known about this person yet."
    tail = f" Not yet known: {', '.join(k.replace('_', ' ') for k in missing)}." if missing else ""
    return f"{head}{tail} (profile {completeness.score}% complete)"
