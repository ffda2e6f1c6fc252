"""Seed 000 tools over HTTP: POST /v1/save_info (strataflow.pipeline.save_info), /v1/summarize
(strataflow.memory.user_memory) and /v1/user_context (strataflow.retrieval.user_context)."""

from __future__ import annotations

from fastapi import APIRouter

from models.user_memory import ProfileSummary, SaveInfoResult, UserContext
from strataflow.memory.user_memory import summarize as summarize_profile
from strataflow.pipeline.save_info import save_exchange
from strataflow.retrieval.user_context import get_user_context
from strataflow.service.deps import ActingDep, DbDep, LlmSlotDep, OpenerDep, SettingsDep, work
from strataflow.service.errors import error_responses
from strataflow.service.schemas import SaveInfoBody, SubjectBody, UserContextBody

router = APIRouter(prefix="/v1", tags=["seed 000 tools"])
RESPONSES = error_responses()


@router.post("/save_info", response_model=SaveInfoResult, responses=RESPONSES, dependencies=[work("extract")])
def save_info(
    body: SaveInfoBody, _slot: LlmSlotDep, writer: OpenerDep, settings: SettingsDep
) -> SaveInfoResult:
    """Extract what the user stated in one exchange (the extraction stage, now) and save it with seed 000's
    rules: {extracted_info, saved_count, saved_memories, skipped_fields, llm_calls}. A key's extractions run
    at most STRATAFLOW_API_LLM_CONCURRENCY_PER_KEY at a time; the others wait for their turn, and no database
    connection is held while the model answers."""
    opener, acting = writer
    return save_exchange(
        opener, settings, acting.namespace, body.subject, body.user_message, body.assistant_message,
        body.existing_info,
    )  # fmt: skip


@router.post(
    "/summarize", response_model=ProfileSummary, responses=RESPONSES, dependencies=[work("summarize")]
)
def summarize(body: SubjectBody, db: DbDep, acting: ActingDep) -> ProfileSummary:
    """The subject's profile in seed 000's four sections, completeness {score, filled_fields,
    missing_fields} and a narrative_summary in the subject's language."""
    return summarize_profile(db, acting.namespace, body.subject)


@router.post(
    "/user_context", response_model=UserContext, responses=RESPONSES, dependencies=[work("context", "scan")]
)
def user_context(body: UserContextBody, db: DbDep, acting: ActingDep, settings: SettingsDep) -> UserContext:
    """The subject's memories relevant to `query`: {memories, user_profile_summary, total_memories}."""
    return get_user_context(db, settings, acting.namespace, body.subject, body.query, agent_id=acting.agent)
