"""The embed-pending task: every row without an embedding (strataflow/pipeline/embed.py)."""

from __future__ import annotations

from prefect import task

from models.results import EmbedResult
from strataflow.config import Settings
from strataflow.pipeline.embed import embed_pending


@task(name="embed-pending", retries=2, retry_delay_seconds=[10, 60])
def embed_pending_task(
    settings: Settings, reembed: bool = False, namespace: str | None = None
) -> EmbedResult:
    """Embed every row without an embedding (no progress bar inside a flow)."""
    return embed_pending(settings, reembed=reembed, progress=False, namespace=namespace)
