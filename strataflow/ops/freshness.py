"""Memory within two minutes: the `strataflow.messages.received` event of an accepted online write.

POST /v1/messages and mem0's add (infer=true) call emit_messages_received after their transaction has
committed (a FastAPI background task, after the response): one event per write, resource
`strataflow.namespace.<namespace>`, payload the number of messages and the scopes (by hash, never a subject
id). The `fresh` deployment's trigger (prefect.yaml, flows/fresh.py) turns them into runs.

Sending never blocks nor fails the write: it is one HTTP POST to the Prefect API's /events with a short
timeout, and any error is logged and dropped (the incremental and nightly flows still extract the messages).
The API address is PREFECT_API_URL when the API server has one, else the one `strataflow serve` recorded in
STRATAFLOW_HOME/run/prefect-api-url while it runs (so `strataflow serve` and `strataflow api` started side by
side find each other); with neither, nothing is sent.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.request
import uuid
from datetime import UTC, datetime
from pathlib import Path

from strataflow.config import Settings
from strataflow.pipeline.runs import scope_ref

logger = logging.getLogger(__name__)

EVENT = "strataflow.messages.received"
RESOURCE_PREFIX = "strataflow.namespace."
SEND_TIMEOUT_S = 3.0


def url_file(settings: Settings) -> Path:
    return settings.home.expanduser() / "run" / "prefect-api-url"


def record_api_url(settings: Settings, url: str) -> Path:
    """Called by `strataflow serve`: where the API servers of this home send their events."""
    path = url_file(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(url + "\n", encoding="utf-8")
    return path


def forget_api_url(settings: Settings, url: str) -> None:
    """Called by `strataflow serve` when it stops: only its own address (another serve may have replaced
    it)."""
    path = url_file(settings)
    try:
        if path.read_text(encoding="utf-8").strip() == url:
            path.unlink()
    except OSError:
        pass


def prefect_api_url(settings: Settings) -> str | None:
    configured = os.environ.get("PREFECT_API_URL")
    if configured:
        return configured.rstrip("/")
    try:
        recorded = url_file(settings).read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return recorded.rstrip("/") or None


def received_event(namespace: str, scopes: list[str], messages: int) -> dict[str, object]:
    return {
        "id": str(uuid.uuid4()),
        "occurred": datetime.now(UTC).isoformat(),
        "event": EVENT,
        "resource": {
            "prefect.resource.id": f"{RESOURCE_PREFIX}{namespace}",
            "strataflow.namespace": namespace,
        },
        "payload": {"messages": messages, "scopes": scopes},
    }


def emit_messages_received(settings: Settings, namespace: str, subjects: list[str], messages: int) -> bool:
    """Send the event for an accepted write of messages in namespace; False (logged) when it could not be
    sent. Never raises."""
    if messages <= 0:
        return False
    url = prefect_api_url(settings)
    if url is None:
        return False
    scopes = sorted({scope_ref(namespace, subject) for subject in subjects})
    body = json.dumps([received_event(namespace, scopes, messages)]).encode()
    request = urllib.request.Request(
        f"{url}/events", data=body, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=SEND_TIMEOUT_S) as response:
            response.read()
    except Exception as exc:  # a missing or slow Prefect API must never fail nor slow a write
        logger.warning("could not send %s for namespace %s to %s: %s", EVENT, namespace, url, exc)
        return False
    return True
