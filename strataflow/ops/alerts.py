"""Alerts and run events through Prefect's own machinery (open-source server: events, automations, blocks).

Every strataflow flow run emits, when it closes its pipeline_runs row, the event `strataflow.run.completed`
(any final state but failed; payload: the run's counts) and, when some units failed,
`strataflow.run.completed_with_errors` too (payload: the counts and the failed scopes, by hash). Downstream
deployments chain on them with a deployment trigger (docs/deployments.md has one that runs the dbt build
after the weekly).

`register_alerts(url)` saves a Webhook block and one automation, `strataflow-alerts`, that POSTs a JSON
body to the webhook when a run of a strataflow flow (FLOW_NAMES) ends Failed or Crashed, or emits
completed_with_errors. `strataflow serve` calls it when STRATAFLOW_ALERT_WEBHOOK is set; `strataflow
notify setup --webhook URL` on any Prefect server (PREFECT_API_URL). Rerunning replaces the block's URL and
the automation, never adds a second one.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

from models.params import RunSummary

logger = logging.getLogger(__name__)

AUTOMATION_NAME = "strataflow-alerts"
WEBHOOK_BLOCK = "strataflow-alert-webhook"
FLOW_NAMES = ["nightly", "weekly", "incremental", "fresh", "assets", "backfill", "analytics"]
EVENT_COMPLETED = "strataflow.run.completed"
EVENT_WITH_ERRORS = "strataflow.run.completed_with_errors"
ALERT_EVENTS = {"prefect.flow-run.Failed", "prefect.flow-run.Crashed", EVENT_WITH_ERRORS}

# The body POSTed to the webhook (a Jinja template Prefect renders per event). `text` reads well in Slack
# and similar; flow_run_id names the Prefect flow run (the resource of a state event, a label of ours).
PAYLOAD = """{
  "text": "strataflow alert: {{ event.event }} ({{ event.resource.get('prefect.resource.name', '') }})",
  "event": "{{ event.event }}",
  "occurred": "{{ event.occurred }}",
  "resource_id": "{{ event.resource.id }}",
  "flow_run_name": "{{ event.resource.get('prefect.resource.name', '') }}",
  "flow_run_id": "{{ event.resource.get('strataflow.flow-run-id', event.resource.id.split('.')[-1]) }}",
  "state_message": {{ (event.payload.get('validated_state') or {}).get('message', '') | tojson }},
  "payload": {{ event.payload | tojson }}
}"""


def run_event_names(summary: RunSummary) -> list[str]:
    """The events a closed run emits: completed for any state but failed, and completed_with_errors."""
    if summary.status == "failed":
        return []  # the flow run itself ends Failed: Prefect emits prefect.flow-run.Failed
    names = [EVENT_COMPLETED]
    if summary.status == "completed_with_errors":
        names.append(EVENT_WITH_ERRORS)
    return names


def emit_run_events(summary: RunSummary) -> list[str]:
    """Emit the run's events to the Prefect API (resource strataflow.run.<run id>, the Prefect flow run as a
    related resource); returns the names emitted. Emitting never fails the run."""
    from prefect.events import emit_event

    resource = {
        "prefect.resource.id": f"strataflow.run.{summary.run_id}",
        "prefect.resource.name": f"{summary.flow} run {summary.run_id}",
        "strataflow.flow": summary.flow,
        "strataflow.status": summary.status,
    }
    related = []
    if summary.prefect_flow_run_id:
        resource["strataflow.flow-run-id"] = summary.prefect_flow_run_id
        related.append(
            {"prefect.resource.id": f"prefect.flow-run.{summary.prefect_flow_run_id}",
             "prefect.resource.role": "flow-run"}
        )  # fmt: skip
    payload: dict[str, Any] = {
        "flow": summary.flow,
        "status": summary.status,
        "run_id": summary.run_id,
        "flow_run_id": summary.prefect_flow_run_id,
        "counts": summary.counts.model_dump(mode="json"),
        "failed_scopes": summary.errors,
    }
    emitted = []
    for name in run_event_names(summary):
        if emit_event(event=name, resource=resource, related=related, payload=payload) is not None:
            emitted.append(name)
    return emitted


def alert_trigger() -> Any:
    """The automation's trigger: a run of a strataflow flow that failed, crashed or completed with errors."""
    from prefect.events.schemas.automations import EventTrigger, Posture

    return EventTrigger(
        expect=ALERT_EVENTS,
        match={"prefect.resource.id": ["prefect.flow-run.*", "strataflow.run.*"]},
        match_related={"prefect.resource.role": "flow", "prefect.resource.name": FLOW_NAMES},
        posture=Posture.Reactive,
        threshold=1,
    )


def register_alerts(webhook_url: str) -> uuid.UUID:
    """Save the Webhook block and (re)create the `strataflow-alerts` automation on the current Prefect API;
    returns the automation's id."""
    from prefect.blocks.webhook import Webhook
    from prefect.client.orchestration import get_client
    from prefect.events.actions import CallWebhook
    from prefect.events.schemas.automations import AutomationCore

    block_id = Webhook(url=webhook_url, method="POST").save(WEBHOOK_BLOCK, overwrite=True)
    automation = AutomationCore(
        name=AUTOMATION_NAME,
        description="strataflow: POST failed, crashed and completed_with_errors runs to the webhook",
        enabled=True,
        trigger=alert_trigger(),
        actions=[CallWebhook(block_document_id=block_id, payload=PAYLOAD)],
    )
    with get_client(sync_client=True) as client:
        for old in client.read_automations_by_name(AUTOMATION_NAME):
            client.delete_automation(old.id)
        return client.create_automation(automation)
