"""The ingest-assets task: data assets into long-term memory (strataflow/pipeline/assets.py)."""

from __future__ import annotations

import uuid

from prefect import task

from models.results import AssetResult
from strataflow.config import Settings
from strataflow.pipeline.assets import ingest_assets


@task(name="ingest-assets", retries=2, retry_delay_seconds=[10, 60])
def ingest_assets_task(
    settings: Settings, paths: list[str], namespace: str, run_id: uuid.UUID | None = None
) -> AssetResult:
    """Ingest data asset files into asset_documents and asset_chunks."""
    return ingest_assets(settings, paths, namespace, run_id=run_id)
