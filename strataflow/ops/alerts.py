"""Alerts and run events through Prefect's own machinery (open-source server: events, automations, blocks).

Every strataflow flow run emits, when it closes its pipeline_runs row, the event `strataflow.run.completed`
(any final state but failed; payload: the run's counts) and, when some units failed,
`strataflow.run.completed_with_errors` too (payload: the counts and the failed scopes, by hash). Downstream
deployments chain on them with a deployment trigger (docs/deployments.md has one that runs the dbt build
after the weekly).

`register_alerts(url)` saves a Webhook block and three automations that POST a JSON body to the webhook:
`strataflow-alerts` when a run of a strataflow flow (FLOW_NAMES) ends Failed or Crashed, or emits
completed_with_errors or recovered; `strataflow-late-starts` when a scheduled run has not started on time
(Prefect's Late state), at most once per flow per LATE_REPEAT: a worker that is down makes the 10-minute
incremental late six times an hour, which is one incident, not six; `strataflow-late-runs` when a nightly or
weekly started and has not ended in time. `strataflow serve` calls it when STRATAFLOW_ALERT_WEBHOOK is set;
`strataflow notify setup --webhook URL` on any Prefect server (PREFECT_API_URL). Rerunning replaces the
block's URL and the automations, never adds a second one.

Every body names the flow run's UI page (flow_run_url): Prefect's `ui_url` filter where the server knows
its UI address (PREFECT_UI_URL, which `strataflow serve` sets), else the UI address of the API the alerts
were registered on. A Failed or Crashed run's failed_scopes are the scopes (`namespace/sha256:<hash>`,
runs.scope_ref) its state message names, as an event's are the ones its errors name.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
import uuid
from datetime import timedelta
from typing import Any
from urllib.parse import urlsplit

from models.params import RunSummary
from strataflow.errors import UserError

logger = logging.getLogger(__name__)

AUTOMATION_NAME = "strataflow-alerts"
LATE_AUTOMATION_NAME = "strataflow-late-runs"
LATE_START_AUTOMATION_NAME = "strataflow-late-starts"
LATE_REPEAT = timedelta(hours=1)  # at most one Late alert per flow in this time
SCHEDULED_FLOWS = ["nightly", "weekly"]  # the scheduled runs whose lateness is alerted
WEBHOOK_BLOCK = "strataflow-alert-webhook"
FLOW_NAMES = ["nightly", "weekly", "incremental", "fresh", "assets", "backfill", "analytics"]
EVENT_COMPLETED = "strataflow.run.completed"
EVENT_WITH_ERRORS = "strataflow.run.completed_with_errors"
EVENT_RECOVERED = "strataflow.run.recovered"
ALERT_EVENTS = {"prefect.flow-run.Failed", "prefect.flow-run.Crashed", EVENT_WITH_ERRORS, EVENT_RECOVERED}
LATE_EVENT = "prefect.flow-run.Late"  # a scheduled run that has not started (Prefect's late-runs service)
# A scope as run errors name it (strataflow/pipeline/runs.py scope_ref): namespace/sha256:<hex>.
SCOPE_REF = re.compile(r"[\w.-]+/sha256:[0-9a-f]{6,}")
FINAL_STATES = ["prefect.flow-run.Completed", "prefect.flow-run.Failed", "prefect.flow-run.Crashed",
                "prefect.flow-run.Cancelled"]  # fmt: skip
RUN_TAG = "strataflow.run:"  # the Prefect flow run's tag naming its pipeline_runs row

# The body POSTed to the webhook (a Jinja template Prefect renders per event; every value through tojson, so a
# name with a quote or a newline stays valid JSON). It names the flow, the deployment, the strataflow run id
# (the flow run's `strataflow.run:<id>` tag, or our event's payload), the Prefect flow run and its UI URL,
# the state and its message, counts and failed scopes (by hash). The message keeps the words before the
# exception's own text ("Flow run encountered an exception: StageFailed"): a provider's error text, which
# can quote a user's message, never reaches the webhook.
PAYLOAD = """{%- set p = event.payload or {} -%}
{%- set kinds = {"prefect.flow-run.Failed": "failed", "prefect.flow-run.Crashed": "crashed",
                 "prefect.flow-run.Late": "late",
                 "strataflow.run.completed_with_errors": "completed_with_errors",
                 "strataflow.run.recovered": "recovered"} -%}
{%- set kind = kinds.get(event.event, event.event) -%}
{%- set found = namespace(run_id=p.get("run_id")) -%}
{%- for tag in (flow_run.tags if flow_run else []) -%}
  {%- if tag.startswith("strataflow.run:") -%}{%- set found.run_id = tag[15:] -%}{%- endif -%}
{%- endfor -%}
{%- set flow_name = p.get("flow") or (flow.name if flow else none)
                    or event.resource.get("strataflow.flow") -%}
{%- set run_name = flow_run.name if flow_run else event.resource.get("prefect.resource.name", "") -%}
{%- set full_message = (p.get("validated_state") or {}).get("message") or "" -%}
{%- set message = ": ".join(full_message.split(": ")[:2])[:300] if full_message else p.get("status", "") -%}
{%- set scopes = namespace(found=[]) -%}
{%- for word in full_message.split() -%}
  {%- set word = word.strip(":;,.()[]'") -%}
  {%- if "/sha256:" in word and word not in scopes.found -%}
    {%- set scopes.found = scopes.found + [word] -%}
  {%- endif -%}
{%- endfor -%}
{%- set run_url = (flow_run | ui_url) if flow_run else none -%}
{%- set fallback = ("__UI_URL__/runs/flow-run/" ~ flow_run.id) if flow_run and "__UI_URL__" else none -%}
{%- set run_url = run_url or fallback -%}
{
  "text": {{ ("strataflow " ~ kind ~ ": flow " ~ (flow_name or "?")
              ~ (" (deployment " ~ deployment.name ~ ")" if deployment else "") ~ ", run " ~ run_name
              ~ (", strataflow run " ~ found.run_id if found.run_id else "")) | tojson }},
  "kind": {{ kind | tojson }},
  "event": {{ event.event | tojson }},
  "occurred": {{ event.occurred | string | tojson }},
  "flow": {{ flow_name | tojson }},
  "deployment": {{ (deployment.name if deployment else none) | tojson }},
  "run_id": {{ found.run_id | tojson }},
  "flow_run_name": {{ run_name | tojson }},
  "flow_run_id": {{ (flow_run.id | string if flow_run else event.resource.get("strataflow.flow-run-id",
                     event.resource.id.split(".")[-1])) | tojson }},
  "flow_run_url": {{ run_url | tojson }},
  "state": {{ ((p.get("validated_state") or {}).get("type") or p.get("status") or kind) | tojson }},
  "state_message": {{ message | tojson }},
  "counts": {{ (p.get("counts") or {}) | tojson }},
  "failed_scopes": {{ (p.get("failed_scopes") or scopes.found) | tojson }},
  "errors": {{ (p.get("errors") or []) | tojson }}
}"""


# The body of the late-run automation: it fires on the absence of an event, so there is no event to quote;
# the flow run is the resource its trigger counted (for_each prefect.resource.id).
LATE_PAYLOAD = """{%- set labels = (firing.triggering_labels if firing else {}) or {} -%}
{%- set resource = labels.get("prefect.resource.id", "") -%}
{
  "text": {{ ("strataflow late: a nightly or weekly run (" ~ resource ~ ") has been running for longer than "
              ~ "__MINUTES__ minutes without completing") | tojson }},
  "kind": "late",
  "flow_run_id": {{ resource.split(".")[-1] | tojson }},
  "flow_run_name": {{ (flow_run.name if flow_run else none) | tojson }},
  "flow_run_url": {{ (((flow_run | ui_url) or ("__UI_URL__/runs/flow-run/" ~ flow_run.id
                        if "__UI_URL__" else none)) if flow_run else none) | tojson }},
  "late_after_minutes": __MINUTES__
}"""


def run_event_names(summary: RunSummary, previous: str | None = None) -> list[str]:
    """The events a closed run emits: completed for any state but failed, completed_with_errors, and
    recovered when it completed cleanly after a run of the same flow that did not (previous: that run's
    final state)."""
    if summary.status == "failed":
        return []  # the flow run itself ends Failed: Prefect emits prefect.flow-run.Failed
    names = [EVENT_COMPLETED]
    if summary.status == "completed_with_errors":
        names.append(EVENT_WITH_ERRORS)
    if summary.status == "completed" and previous in ("failed", "crashed", "completed_with_errors"):
        names.append(EVENT_RECOVERED)
    return names


def tag_flow_run(prefect_flow_run_id: str | uuid.UUID, run_id: uuid.UUID) -> None:
    """Tag the Prefect flow run with its strataflow run id (`strataflow.run:<id>`), so an alert on its Failed
    or Crashed state names the run. Never fails the run."""
    from prefect.client.orchestration import get_client

    try:
        with get_client(sync_client=True) as client:
            current = client.read_flow_run(uuid.UUID(str(prefect_flow_run_id)))
            tags = [t for t in current.tags if not t.startswith(RUN_TAG)] + [f"{RUN_TAG}{run_id}"]
            client.update_flow_run(current.id, tags=tags)
    except Exception as exc:  # noqa: BLE001 (the API being away must not fail a run)
        logger.warning("could not tag flow run %s with its strataflow run id: %s", prefect_flow_run_id, exc)


def failed_scopes(errors: list[str]) -> list[str]:
    """The scopes run errors name (namespace/sha256:<hash>), each once, in order."""
    return list(dict.fromkeys(ref for error in errors for ref in SCOPE_REF.findall(error)))


def emit_run_events(summary: RunSummary, previous: str | None = None) -> list[str]:
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
        "failed_scopes": failed_scopes(summary.errors),
        "errors": summary.errors,
    }
    emitted = []
    for name in run_event_names(summary, previous):
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


def late_start_trigger() -> Any:
    """A scheduled run of a strataflow flow that has not started on time (Prefect's Late state), bucketed per
    flow: the first Late run of a flow fires at once, the flow's next ones within LATE_REPEAT fire nothing."""
    from prefect.events.schemas.automations import EventTrigger, Posture

    return EventTrigger(
        expect={LATE_EVENT},
        match={"prefect.resource.id": "prefect.flow-run.*"},
        match_related={"prefect.resource.role": "flow", "prefect.resource.name": FLOW_NAMES},
        for_each={"related:flow:prefect.resource.name"},
        posture=Posture.Reactive,
        threshold=1,
        within=LATE_REPEAT,
    )


def late_run_trigger(minutes: int) -> Any:
    """The late-run automation's trigger: a nightly or weekly flow run that started Running and reached no
    final state within `minutes` (a proactive trigger: it fires on the absence of the completed event).
    A scheduled run that never starts is alerted by Prefect's Late state (the alert automation)."""
    from prefect.events.schemas.automations import EventTrigger, Posture

    return EventTrigger(
        after={"prefect.flow-run.Running"},
        expect=set(FINAL_STATES),
        match={"prefect.resource.id": "prefect.flow-run.*"},
        match_related={"prefect.resource.role": "flow", "prefect.resource.name": SCHEDULED_FLOWS},
        for_each={"prefect.resource.id"},
        posture=Posture.Proactive,
        threshold=1,
        within=timedelta(minutes=minutes),
    )


def literal_loopback(url: str) -> bool:
    """True when the URL's host is a loopback address written out (127.0.0.1, ::1): a receiver on this very
    machine that the operator named, which is the explicit allowance STRATAFLOW_ALERT_WEBHOOK_ALLOW_PRIVATE
    would otherwise be (a name that resolves to loopback is not)."""
    host = urlsplit(url).hostname or ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_webhook(url: str, allow_private: bool) -> None:
    """Refuse a webhook URL that is not http(s), or whose host is (or resolves to) a private, link-local,
    loopback or otherwise internal address, unless allowed (allow_private, or a literal loopback address).
    Prefect checks the address again when it calls the webhook (its Webhook block's allow_private_urls), so a
    name that later resolves elsewhere is refused then too."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"the alert webhook must be an http(s) URL with a host, not {url!r}")
    if allow_private or literal_loopback(url):
        return
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(parts.hostname, parts.port or 443)}
    except OSError as exc:
        raise UserError(f"the alert webhook's host {parts.hostname!r} does not resolve: {exc}") from None
    for address in sorted(addresses):
        ip = ipaddress.ip_address(address.split("%")[0])
        if not ip.is_global or ip.is_multicast:
            raise UserError(
                f"the alert webhook's host {parts.hostname!r} is an internal address ({ip}: private, "
                "link-local, loopback or reserved); set STRATAFLOW_ALERT_WEBHOOK_ALLOW_PRIVATE=true (or "
                "`--allow-private`) if that receiver is meant"
            )


def register_alerts(
    webhook_url: str, allow_private: bool = False, late_after_minutes: int = 240
) -> uuid.UUID:
    """Save the Webhook block and (re)create the `strataflow-alerts` automation on the current Prefect API;
    returns the automation's id. The URL is checked first (check_webhook)."""
    check_webhook(webhook_url, allow_private)
    from prefect.blocks.webhook import Webhook
    from prefect.client.orchestration import get_client
    from prefect.events.actions import CallWebhook
    from prefect.events.schemas.automations import AutomationCore

    block = Webhook(
        url=webhook_url,
        method="POST",
        headers={"Content-Type": "application/json"},
        allow_private_urls=allow_private or literal_loopback(webhook_url),
    )
    block_id = block.save(WEBHOOK_BLOCK, overwrite=True)
    payload = PAYLOAD.replace("__UI_URL__", ui_base())
    automation = AutomationCore(
        name=AUTOMATION_NAME,
        description="strataflow: POST failed, crashed, completed_with_errors and recovered runs",
        enabled=True,
        trigger=alert_trigger(),
        actions=[CallWebhook(block_document_id=block_id, payload=payload)],
    )
    late_start = AutomationCore(
        name=LATE_START_AUTOMATION_NAME,
        description="strataflow: POST a scheduled run that has not started, at most once an hour per flow",
        enabled=True,
        trigger=late_start_trigger(),
        actions=[CallWebhook(block_document_id=block_id, payload=payload)],
    )
    late = AutomationCore(
        name=LATE_AUTOMATION_NAME,
        description=f"strataflow: POST a nightly or weekly run running over {late_after_minutes} min",
        enabled=True,
        trigger=late_run_trigger(late_after_minutes),
        actions=[
            CallWebhook(
                block_document_id=block_id,
                payload=LATE_PAYLOAD.replace("__MINUTES__", str(int(late_after_minutes))).replace(
                    "__UI_URL__", ui_base()
                ),
            )
        ],
    )
    with get_client(sync_client=True) as client:
        for name in (AUTOMATION_NAME, LATE_START_AUTOMATION_NAME, LATE_AUTOMATION_NAME):
            for old in client.read_automations_by_name(name):
                client.delete_automation(old.id)
        client.create_automation(late)
        client.create_automation(late_start)
        return client.create_automation(automation)


def ui_base() -> str:
    """The Prefect UI's address as this process reaches the API (PREFECT_UI_URL, else derived from
    PREFECT_API_URL), for links the server cannot make itself; "" when unknown. Never a quote or brace: it
    goes into the payload template as it is."""
    from prefect.settings import PREFECT_UI_URL

    base = str(PREFECT_UI_URL.value() or "").rstrip("/")
    return base if re.fullmatch(r"https?://[^\s\"'{}%]+", base) else ""
