"""Seed 000 memory manager: save_info (save_exchange), summarize and get_user_context over L2.

save_exchange runs the extraction stage of tasks/extract.py on one exchange, now: the same prompt
(build_extract_messages, PROMPT_VERSION), output schema (ExtractionOutput), gateway, ledger and cache. The
assistant's turn goes along as context (marked as such in the prompt); only items stated in the user's turn
are kept. The exchange is not written to L1: its messages get the ids 1 (user) and 2 (assistant) inside the
prompt only, and the saved items carry metadata {"via": "save_info"} instead of L1 lineage. Seed 000's rules
then apply: a field of existing_info with the same value is skipped; every other item is upserted as an
extracted item (strataflow.memory.store: an unchanged value is skipped, a newer one wins, a manual one is
never overwritten). The same exchange twice is answered by the LLM cache and saves nothing the second time.

summarize groups the vocabulary keys into the four seed 000 sections (basic, career, immigration, family),
scores completeness as the share of vocabulary keys filled, and writes the narrative in the language of the
subject's own statements (Chinese for a Chinese conversation). Facts with no place in the seed 002 documents
are here. get_user_context answers load_context: the subject's memories, best for the query first.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, text

from models.common import DEFAULT_IMPORTANCE
from models.llm import ExtractedItem, ExtractionOutput
from models.user_memory import (
    Completeness,
    ContextMemory,
    ProfileSummary,
    SavedMemory,
    SaveInfoResult,
    UserContext,
    UserProfile,
)
from models.vocabulary import PROFILE_KEYS, PROFILE_SECTIONS, normalize_key, program_category
from strataflow.config import Settings
from strataflow.memory import store
from strataflow.retrieval.query_intent import key_hints
from strataflow.textsearch import TSQUERY_SQL, detect_lang, or_query_parts

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
    """
    select kind, key, value, statement, metadata from memory_items
    where namespace = :namespace and subject_id = :subject_id and status = 'active'
        and kind <> 'hot_summary' and (agent_id is null or is_shared)
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
SELECT_CONTEXT_MEMORIES = text(
    f"""
    with q as (select {TSQUERY_SQL.format(en=":q_en", zh=":q_zh")} as tsq)
    select mi.item_id, mi.kind, mi.key, mi.value, mi.statement, mi.importance, mi.valid_from, mi.metadata,
        count(*) over () as total
    from memory_items as mi cross join q
    where mi.namespace = :namespace and mi.subject_id = :subject_id and mi.status = 'active'
        and mi.kind <> 'hot_summary'
        and (cast(:agent_id as text) is null or mi.agent_id is null or mi.agent_id = :agent_id
            or mi.is_shared)
    order by coalesce(ts_rank(mi.fts, q.tsq), 0)
            + 0.5 * (mi.key = any(:hint_keys) or mi.kind = any(:hint_kinds))::int desc,
        mi.importance desc, mi.valid_from desc, mi.item_id
    limit :limit
    """
)


def save_exchange(
    conn: Connection,
    settings: Settings,
    namespace: str,
    subject_id: str,
    user_message: str,
    assistant_message: str | None = None,
    existing_info: dict[str, Any] | None = None,
) -> SaveInfoResult:
    """Seed 000 save_info: extract the exchange now (the extraction stage's prompt and gateway), then save."""
    from strataflow.db.engine import engine_for
    from strataflow.llm.gateway import LLMGateway
    from strataflow.memory.profiles import refresh_documents
    from tasks import extract

    if not user_message.strip():
        raise ValueError("save_info: user_message is empty")
    now = datetime.now(UTC)
    batch = _exchange(user_message, assistant_message, now)  # the assistant's turn rides along as context
    scope = {"namespace": namespace, "subject_id": subject_id}
    existing_keys = [row[0] for row in conn.execute(extract.SELECT_EXISTING_KEYS, scope)]
    gateway = LLMGateway(settings, engine_for(settings), None)
    output = gateway.complete(
        extract.STAGE,
        extract.PROMPT_VERSION,
        extract.build_extract_messages(batch, existing_keys),
        ExtractionOutput,
        namespace=namespace,
        subject_id=subject_id,
        cache_key=extract.batch_cache_key(batch),
    )
    known = {normalize_key(k): v for k, v in (existing_info or {}).items()}
    ids = {m.message_id for m in batch if m.role in extract.EXTRACT_ROLES}  # facts: the user's turn only
    lang = detect_lang(user_message)
    result = SaveInfoResult(extracted_info={}, saved_count=0, llm_calls=gateway.requests_sent)
    for item in output.items:
        if item.kind.value == "hot_summary" or not ids & set(item.source_message_ids):
            continue
        if item.key in known and _same(known[item.key], item.value):
            result.skipped_fields.append(item.key)
            result.actions[item.key] = "in_existing_info"
            continue
        result.extracted_info.setdefault(item.key, item.value)
        action = store.upsert_item(
            conn, namespace=namespace, subject_id=subject_id, kind=item.kind.value, key=item.key,
            value=item.value, statement=item.statement, category=item.category, importance=item.importance,
            confidence=item.confidence, source="extracted", event_at=now,
            prompt_version=extract.PROMPT_VERSION, model=gateway.model_for(extract.STAGE),
            metadata={"via": "save_info", **({"approximate": True} if item.approximate else {})},
        )  # fmt: skip
        result.actions[item.key] = action
        if action in store.CHANGED_ACTIONS:
            result.saved_memories.append(_saved(item, lang))
        else:
            result.skipped_fields.append(item.key)
    result.saved_count = len(result.saved_memories)
    refresh_documents(conn, namespace, subject_id)
    return result


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


def get_user_context(
    conn: Connection,
    settings: Settings,
    namespace: str,
    subject_id: str,
    query: str,
    *,
    limit: int = 20,
    agent_id: str | None = None,
) -> UserContext:
    """Seed 000 load_context: the subject's memories ranked by relevance to query, then importance."""
    del settings  # full text and key hints only: no embedding, so a memory saved a second ago is found
    q_en, q_zh = or_query_parts(query)
    hint_keys, hint_kinds = key_hints(query)
    params = {
        "namespace": namespace, "subject_id": subject_id, "agent_id": agent_id, "q_en": q_en, "q_zh": q_zh,
        "hint_keys": hint_keys, "hint_kinds": hint_kinds, "limit": limit,
    }  # fmt: skip
    rows = list(conn.execute(SELECT_CONTEXT_MEMORIES, params))
    summary = summarize(conn, namespace, subject_id)
    lang = summary.language
    memories = [
        ContextMemory(
            id=row.item_id,
            type=SEED_TYPES.get(row.kind, row.kind.upper()),
            content=_content(
                row.key, row.value, row.statement, lang, bool((row.metadata or {}).get("approximate"))
            ),
            importance=row.importance,
            category=_category(row.value),
            createdAt=row.valid_from.date().isoformat(),
            field=row.key,
        )  # fmt: skip
        for row in rows
    ]
    known = len(summary.completeness.filled_fields) >= SUMMARY_MIN_FIELDS
    return UserContext(
        memories=memories,
        user_profile_summary=summary.narrative_summary if known else None,
        total_memories=int(rows[0].total) if rows else 0,
    )


def _exchange(user_message: str, assistant_message: str | None, now: datetime) -> list[Any]:
    from strataflow.ops.scopes import ScopeMessage

    turns = [("user", user_message)] + ([("assistant", assistant_message)] if assistant_message else [])
    return [
        ScopeMessage(index, role, body, hashlib.sha256(body.encode()).hexdigest(), now, 0)
        for index, (role, body) in enumerate(turns, start=1)
    ]


def _saved(item: ExtractedItem, lang: str) -> SavedMemory:
    return SavedMemory(
        memoryType=SEED_TYPES.get(item.kind.value, item.kind.value.upper()),
        content=_content(item.key, item.value, item.statement, lang, item.approximate),
        field=item.key,
        category=_category(item.value),
        importance=item.importance if item.importance is not None else DEFAULT_IMPORTANCE.get(item.kind, 50),
    )


def _content(key: str, value: Any, statement: str | None, lang: str, approximate: bool) -> str:
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


def _category(value: Any) -> str | None:
    """The seed 000 program category the value names (QMAS, GEP, IANG, TTPS, CIES, TECHTAS), if any."""
    values = value if isinstance(value, list) else [value]
    return next((c for c in (program_category(str(v)) for v in values) if c), None)


def _same(known: Any, value: Any) -> bool:
    return known == value or str(known).strip() == str(value).strip()


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
