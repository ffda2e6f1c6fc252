"""POST /v1/messages (seed 001 saveConversation): canonical messages into L1 now (ingest.online)."""

from __future__ import annotations

from fastapi import APIRouter, BackgroundTasks
from fastapi.responses import JSONResponse

from strataflow.ingest.online import OnlineWrite, write_messages
from strataflow.ops.freshness import emit_messages_received
from strataflow.service.deps import DbDep, SettingsDep, WritingDep, work
from strataflow.service.errors import error_response, error_responses
from strataflow.service.schemas import MessagesBody

router = APIRouter(prefix="/v1/messages", tags=["messages"])


@router.post("", response_model=OnlineWrite, responses=error_responses(), dependencies=[work("write")])
def post_messages(
    body: MessagesBody, db: DbDep, acting: WritingDep, settings: SettingsDep, background: BackgroundTasks
) -> OnlineWrite | JSONResponse:
    """Write one message or a list into L1 of the key's namespace, idempotent on (source, source_message_id).

    A record's created_at must lie inside the online write window, [now - the retention, now + 1 day] by
    default: outside, 422 naming created_at. A record the batch ingest would quarantine is quarantined (and
    named in `problems`); when every record is, the answer is 422 naming the first bad field. A written
    message is found by /v1/context at once (full text); its embedding comes with the next embed run. With
    `strataflow serve` running, its L2 memory follows within about two minutes (docs/deployments.md). A key
    bound to an agent writes that agent's messages: a record naming another agent is 403.
    """
    records = body.records()
    caller = acting.caller
    for record in records:  # each record names its own author: the key's agent, or one it may act as
        agent = caller.agent_for(record.get("agent_id"))
        if agent is not None:
            record["agent_id"] = agent
    written = write_messages(db, settings, acting.namespace, records)
    if written.inserted + written.updated:  # after the commit and the response: never delays nor fails it
        subjects = [str(record.get("subject_id")) for record in records]
        background.add_task(
            emit_messages_received, settings, acting.namespace, subjects, written.inserted + written.updated
        )
    if written.accepted == 0 and written.problems:
        first = written.problems[0]
        return error_response(422, first.error, first.field, code=first.reason)
    return written
