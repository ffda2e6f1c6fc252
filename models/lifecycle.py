"""Results of the lifecycle stages: rollup, reflect, expire, forget (the CLI prints them)."""

from __future__ import annotations

from datetime import date, datetime

from pydantic import BaseModel, Field

from models.results import LLMStageResult


class RollupResult(LLMStageResult):
    """Weekly rollup into L3 (weekly_reports); units: the scope-weeks that needed the model."""

    weeks_considered: int = 0  # scope-weeks looked at (changed or missing, or every scope of --week-start)
    reports_written: int = 0  # inserted or rewritten with a new summary (one LLM request each, cache aside)
    metrics_refreshed: int = 0  # unchanged input, metrics updated only (no LLM call)
    unchanged: int = 0  # nothing to do
    skipped_expired: int = 0  # no live L1 rows left for the week: nothing to summarise
    messages_read: int = 0
    messages_sampled_out: int = 0  # long weeks: messages left out of the prompt to fit it
    weeks: list[date] = Field(default_factory=list)  # distinct week starts written

    def units_attempted(self) -> int:
        return self.reports_written + self.units_failed


class ReflectResult(LLMStageResult):
    """Insight reflection from L2 items not yet reflected (units: scopes)."""

    scopes: int = 0  # scopes worked on (failed ones included)
    items_reflected: int = 0
    insights_created: int = 0  # a key with no current insight
    insights_updated: int = 0  # a changed statement: old closed (valid_to), new current
    insights_unchanged: int = 0
    insights_historical: int = 0  # older evidence than the current insight: written closed, into history

    def units_attempted(self) -> int:
        return self.scopes


class ExpireResult(BaseModel):
    """Guarded L1 expiry."""

    dry_run: bool = False
    forced: bool = False
    reason: str | None = None
    expired_rows: int = 0  # rows past expires_at (in the namespace, if one was given)
    removed_rows: int = 0  # dropped with their partition + deleted; with dry_run: would be removed
    dropped_rows: int = 0
    deleted_rows: int = 0
    guarded_rows: int = 0  # past expires_at but kept: their week has no covering weekly report
    partitions_dropped: list[str] = Field(default_factory=list)
    by_namespace: dict[str, dict[str, int]] = Field(default_factory=dict)
    oldest_event_at: datetime | None = None
    newest_event_at: datetime | None = None
    archive_path: str | None = None
    embedding_cache_pruned: int = 0  # cached vectors of removed texts that no remaining row uses
    report_id: int | None = None


class ForgetResult(BaseModel):
    """Data-subject deletion: rows removed per table (and archive rows rewritten)."""

    namespace: str
    subject_hash: str  # sha256 of namespace + subject id; the report stores this, never the id
    counts: dict[str, int] = Field(default_factory=dict)
    report_id: int | None = None

    @property
    def total(self) -> int:
        """Rows removed (llm_calls and pipeline_runs rows are kept, only unlinked or scrubbed)."""
        kept = ("_unlinked", "_cleared", "_scrubbed")
        return sum(count for table, count in self.counts.items() if not table.endswith(kept))
