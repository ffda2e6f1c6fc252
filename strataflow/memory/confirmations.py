"""L2 confirmations: which model, prompt version and run last re-extracted an item and found its value
unchanged (a backfill reprocess with another model, strataflow/pipeline/extract.py and
strataflow/pipeline/hot_memory.py). A changed value is a new version (strataflow/memory/store.py, which clears
the confirmation); an unchanged one is recorded here, on the item (memory_items.confirmed_*, migration 200).
The caller owns the transaction.
"""

from __future__ import annotations

import uuid

from sqlalchemy import Connection, text

CONFIRM_ITEM = text(
    """
    update memory_items set confirmed_model = :model, confirmed_prompt_version = :prompt_version,
        confirmed_run_id = :run_id, confirmed_at = now()
    where namespace = :namespace and subject_id = :subject_id and agent_id is null and kind = :kind
      and key = :key and source = 'extracted' and status = 'active'
      and starts_with(prompt_version, :stage_prefix)
      and (coalesce(confirmed_model, model), coalesce(confirmed_prompt_version, prompt_version))
          is distinct from (cast(:model as text), cast(:prompt_version as text))
    """
)


def confirm_item(
    conn: Connection,
    *,
    namespace: str,
    subject_id: str,
    kind: str,
    key: str,
    model: str,
    prompt_version: str,
    run_id: uuid.UUID | None,
) -> bool:
    """Record on an extracted item whose value a re-extraction found unchanged which model, prompt version
    and run confirmed it (a reprocess with another model). Items of the pipeline only (no agent); only the
    stage that wrote the item confirms it
    (its prompt versions share the name before '-v': extract-v1, extract-v2). False when nothing was
    written: a manual or deleted item, another stage's item, or one this model and prompt version already
    produced or confirmed."""
    params = {
        "stage_prefix": prompt_version.rsplit("-v", 1)[0] + "-",
        "namespace": namespace,
        "subject_id": subject_id,
        "kind": kind,
        "key": key,
        "model": model,
        "prompt_version": prompt_version,
        "run_id": run_id,
    }
    return bool(conn.execute(CONFIRM_ITEM, params).rowcount)
