"""The expire-l1 task: guarded L1 expiry with its deletion report (strataflow/pipeline/expire.py)."""

from __future__ import annotations

import uuid

from prefect import task

from models.lifecycle import ExpireResult
from strataflow.config import Settings
from strataflow.pipeline.expire import expire_l1


@task(name="expire-l1", retries=2, retry_delay_seconds=[10, 60])
def expire_l1_task(
    settings: Settings,
    dry_run: bool = False,
    force: bool = False,
    reason: str | None = None,
    run_id: uuid.UUID | None = None,
    namespace: str | None = None,
) -> ExpireResult:
    """Drop or delete L1 rows past expires_at where a weekly report covers them."""
    return expire_l1(
        settings, dry_run=dry_run, force=force, reason=reason, run_id=run_id, namespace=namespace
    )
