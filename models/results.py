"""What the pipeline stages return: one small result model per stage, with counts (and, for the LLM stages,
the work units that failed and why).

The LLM stages (extract, hot memory, rollup, reflect) share one failure policy through `LLMStageResult`:
a unit is a scope (namespace, subject) or, for the rollup, a scope-week. A unit whose model call fails is
counted in `units_failed` and named in `errors` (by a hash of its scope, never by the subject id) and the
stage goes on with the next unit; a stage whose every attempted unit failed raises (see
strataflow/pipeline/runs.py `raise_if_all_failed`), so its flow run fails. The lifecycle results (rollup,
reflect, expire, forget) are in models/lifecycle.py.
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

from pydantic import BaseModel, Field


class LLMStageResult(BaseModel):
    """The failure bookkeeping every LLM stage result carries."""

    units_failed: int = Field(0, description="work units (scopes or scope-weeks) with no usable model answer")
    errors: list[str] = Field(
        default_factory=list, description="one line per failed unit: '<namespace>/sha256:<hash>: <error>'"
    )
    budget_stopped: bool = Field(False, description="the run's LLM budget ran out; the next run resumes")
    deferred: int = Field(
        0, description="units a provider batch left unanswered (failed, expired): the next run sends them"
    )
    llm_calls: int = Field(0, description="requests sent (ledger rows written by this stage)")
    cache_hits: int = Field(0, description="answers served from the LLM cache (nothing sent)")
    tokens: int = Field(0, description="prompt + completion tokens of the requests sent")
    cost_usd: float = Field(0.0, description="cost of the requests sent, where the model has a known price")

    def units_attempted(self) -> int:
        """Units that needed the model (a subclass says which of its counts those are)."""
        return self.units_failed

    def all_failed(self) -> bool:
        """True when units were attempted and every one of them failed."""
        return self.units_failed > 0 and self.units_failed >= self.units_attempted()

    def add_failure(self, unit: str, error: BaseException) -> None:
        self.units_failed += 1
        self.errors.append(f"{unit}: {error}")


class ExtractResult(LLMStageResult):
    """What one extraction run did (units: scopes)."""

    scopes: int = Field(0, description="scopes worked on (failed ones included)")
    scopes_locked: int = Field(0, description="skipped: another process was extracting them")
    scopes_current: int = Field(
        0, description="recomputing: skipped, the configured model and prompt version produced their window"
    )
    messages: int = 0
    items_new: int = 0
    items_changed: int = 0
    items_unchanged: int = 0
    items_kept_older: int = 0
    items_confirmed: int = Field(0, description="unchanged items a re-extraction by another model confirmed")
    items_dropped: int = Field(
        0, description="output items citing no message of their batch, or internal kinds"
    )
    manual_conflicts: list[dict[str, Any]] = Field(
        default_factory=list,
        description="extracted values kept out by a manual edit (never recorded in runs)",
    )

    def units_attempted(self) -> int:
        return self.scopes


class HotMemoryResult(LLMStageResult):
    """What one hot memory refresh did (units: scopes)."""

    scopes: int = Field(0, description="scopes worked on (failed ones included)")
    scopes_current: int = Field(
        0, description="recomputing: skipped, the configured model and prompt version wrote their summary"
    )
    summaries_written: int = 0
    items_written: int = Field(0, description="typed items (status, decision, preference) new or changed")

    def units_attempted(self) -> int:
        return self.scopes


class ChunkCountsLike(Protocol):
    read: int
    inserted: int
    updated: int
    skipped: int
    quarantined: int


class IngestResult(BaseModel):
    """What one ingest run did; read = records seen (valid or not)."""

    run_id: uuid.UUID | None = None
    files: int = 0
    files_skipped: int = 0
    read: int = 0
    inserted: int = 0
    updated: int = 0
    skipped: int = 0
    quarantined: int = 0

    def add(self, other: ChunkCountsLike) -> None:
        self.read += other.read
        self.inserted += other.inserted
        self.updated += other.updated
        self.skipped += other.skipped
        self.quarantined += other.quarantined


class EmbedResult(BaseModel):
    """Rows embedded per table, texts encoded by the model and texts served from the cache."""

    model: str
    by_namespace: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="rows embedded per namespace and table (pipeline_run_namespaces)"
    )
    conversation_messages: int = 0
    memory_items: int = 0
    weekly_reports: int = 0
    insights: int = 0
    asset_chunks: int = 0
    memory_items_multi: int = Field(
        0, description="items given their multilingual vector (memory_items.embedding_multi)"
    )
    conversation_messages_multi: int = Field(
        0, description="L1 turns given their multilingual vector (conversation_messages.embedding_multi)"
    )
    weekly_reports_multi: int = Field(
        0, description="L3 reports given their multilingual vector (weekly_reports.embedding_multi)"
    )
    asset_chunks_multi: int = Field(
        0, description="asset chunks given their multilingual vector (asset_chunks.embedding_multi)"
    )
    encoded: int = 0
    cache_hits: int = 0

    @property
    def embedded(self) -> int:
        return (
            self.conversation_messages
            + self.memory_items
            + self.weekly_reports
            + self.insights
            + self.asset_chunks
        )


class AssetResult(BaseModel):
    """What one asset ingest did: assets seen, inserted, replaced, unchanged, quarantined, chunk counts."""

    assets: int = 0
    inserted: int = 0
    replaced: int = 0
    unchanged: int = 0
    quarantined: int = 0
    chunks_written: int = 0
    chunks_deleted: int = 0
    encoded: int = 0
    cache_hits: int = 0


class BatchResult(BaseModel):
    """What the provider-batch steps of one run did (strataflow/pipeline/extract_batch.py)."""

    batches_submitted: int = Field(0, description="provider batches this run submitted")
    requests_submitted: int = Field(0, description="requests in them")
    batches_collected: int = Field(0, description="ended batches read (this run's or earlier ones)")
    answered: int = Field(0, description="answers that validated and were cached")
    invalid: int = Field(0, description="answers that did not validate (recorded invalid_output)")
    missing: int = Field(0, description="requests not answered (failed, expired): sent next run")
    batches_waiting: int = Field(0, description="batches still running when the run stopped waiting")
