"""The ingest-logs task: conversation logs into L1 (strataflow/pipeline/ingest.py)."""

from __future__ import annotations

import uuid

from prefect import task
from prefect.cache_policies import NO_CACHE

from models.results import IngestResult
from strataflow.config import Settings
from strataflow.pipeline.ingest import ingest_logs


@task(name="ingest-logs", retries=2, retry_delay_seconds=[10, 60], cache_policy=NO_CACHE)
def ingest_logs_task(
    settings: Settings,
    paths: list[str],
    namespace: str | None = None,
    fmt: str = "auto",
    source: str | None = None,
    mapping: dict[str, str] | None = None,
    run_id: uuid.UUID | None = None,
) -> IngestResult:
    """Ingest log files into L1 (no progress bar inside a flow)."""
    return ingest_logs(settings, paths, namespace, fmt, source, mapping, run_id, progress=False)
