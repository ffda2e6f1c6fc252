"""Flow parameters and run summaries: the Prefect deployment form and the CLI both come from these models.

Dates that default to a day relative to the run are `None` in the model and resolved in
STRATAFLOW_TIMEZONE when the run starts (strataflow/pipeline/run_summary.py `logical_date`): a default
computed here would be frozen into the deployment at deploy time. The CLI options of `strataflow run` are
generated from these models (strataflow/commands/run.py), so a field's description is its --help text.
"""

from __future__ import annotations

import zlib
from datetime import date, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

NAMESPACE_PATTERN = r"^[A-Za-z0-9_.:-]+$"
Namespace = Annotated[str, StringConstraints(min_length=1, max_length=200, pattern=NAMESPACE_PATTERN)]
Paths = Annotated[list[str], Field(max_length=1000)]
# The states of a pipeline run: the one list. The check constraint on pipeline_runs.status (sql/283), dbt's
# accepted values (analytics/dbt_project.yml var run_states) and pipeline_health's count_* columns are tested
# against it (tests/ops/test_run_states.py).
RunStatus = Literal["running", "completed", "completed_with_errors", "budget_stopped", "failed", "crashed"]
RUN_STATES: tuple[str, ...] = get_args(RunStatus)


class Stage(StrEnum):
    """A step a backfill can run; days run the nightly stages, weeks the weekly ones."""

    ingest = "ingest"
    embed = "embed"
    extract = "extract"
    hot_memory = "hot_memory"
    rollup = "rollup"
    reflect = "reflect"
    expire = "expire"


DAY_STAGES = (Stage.ingest, Stage.embed, Stage.extract, Stage.hot_memory)
WEEK_STAGES = (Stage.rollup, Stage.reflect)
DEFAULT_BACKFILL_STAGES = [*DAY_STAGES, *WEEK_STAGES]


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", use_enum_values=False)


class NightlyParams(_Params):
    """Parameters of the nightly flow: ingest new logs, embed, extract, refresh hot memory, expire."""

    run_date: date | None = Field(
        None,
        description="The logical date: the day whose inbox files this run reads (files dated another day"
        " wait for their own night; undated ones are read every night) and that its record carries."
        " Empty: the day before the run's scheduled start, in STRATAFLOW_TIMEZONE.",
    )
    paths: Paths = Field(
        default_factory=list,
        description="Log files or directories to ingest. Empty: the inbox (STRATAFLOW_INBOX_DIR,"
        " default STRATAFLOW_HOME/inbox).",
    )
    namespace: Namespace | None = Field(
        None,
        description="Namespace for records that name none (wins over theirs). Empty: records must carry one.",
    )
    dry_run: bool = Field(False, description="Expire only reports what it would remove.")
    llm_batch: bool = Field(
        False,
        description="Send the night's extraction requests through the provider's batch API (about half the"
        " price, answers within 24 h; an OpenAI-compatible extraction model): the run waits for the batch,"
        " polling every STRATAFLOW_LLM_BATCH_POLL_S, and applies its answers; scopes it left unanswered are"
        " counted and sent by the next run.",
    )


class IncrementalParams(_Params):
    """Parameters of the incremental flow: ingest new inbox files, embed, extract, refresh hot memory."""

    paths: Paths = Field(
        default_factory=list,
        description="Log files or directories to ingest. Empty: every file of the inbox"
        " (STRATAFLOW_INBOX_DIR, default STRATAFLOW_HOME/inbox); an unchanged file is skipped.",
    )
    namespace: Namespace | None = Field(
        None,
        description="Namespace for records that name none (wins over theirs). Empty: records must carry one.",
    )


class WeeklyParams(_Params):
    """Parameters of the weekly flow: roll up complete ISO weeks, reflect insights, embed the reports."""

    week_start: date | None = Field(
        None, description="Monday of one ISO week to roll up. Empty: every complete week not yet reported."
    )
    namespace: Namespace | None = Field(
        None,
        description="Only this namespace. Empty: all.",
    )

    @model_validator(mode="after")
    def _monday(self) -> WeeklyParams:
        if self.week_start is not None and self.week_start.isoweekday() != 1:
            raise ValueError(
                f"week_start {self.week_start} is a {self.week_start:%A}; give the Monday of the week"
            )
        return self


class AssetsParams(_Params):
    """Parameters of the assets flow: ingest data assets into long-term memory and embed their chunks."""

    paths: Paths = Field(
        default_factory=list,
        description="Asset files or directories. Empty: STRATAFLOW_HOME/assets.",
    )
    namespace: Namespace = Field("default", description="Namespace of the assets.")


class AnalyticsParams(_Params):
    """Parameters of the analytics flow: dbt build of analytics/ into schema analytics."""

    full_refresh: bool = Field(False, description="Rebuild every model from scratch (dbt --full-refresh).")


class Shard(BaseModel):
    """One of `count` disjoint parts of the scopes, by a stable hash of (namespace, subject): the unit a stage
    fans out over Dask workers (one task per shard). Shard 0 of 1 is every scope."""

    model_config = ConfigDict(frozen=True)

    index: int = Field(0, ge=0, description="This part, 0 <= index < count.")
    count: int = Field(1, ge=1, le=256, description="How many parts the scopes are split into.")

    @model_validator(mode="after")
    def _inside(self) -> Shard:
        if self.index >= self.count:
            raise ValueError(f"shard index {self.index} is not below the shard count {self.count}")
        return self

    def owns(self, namespace: str, subject_id: str) -> bool:
        """True when the scope (namespace, subject_id) belongs to this part."""
        if self.count == 1:
            return True
        return zlib.crc32(f"{namespace}\x00{subject_id}".encode()) % self.count == self.index


EVERY_SCOPE = Shard()


class Recompute(BaseModel):
    """A backfill that recomputes: the event-time window [since, until) whose extraction, hot memory and
    weekly reports are redone where the configured model or prompt version did not produce them (force:
    everywhere, with fresh model answers instead of the LLM cache)."""

    model_config = ConfigDict(frozen=True)

    since: datetime | None = Field(None, description="Event time from (inclusive). None: from the start.")
    until: datetime | None = Field(None, description="Event time to (exclusive). None: no end.")
    force: bool = Field(False, description="Redo even what the configured model and prompt produced.")

    def covers(self, moment: datetime) -> bool:
        """True when an event time falls inside the window."""
        return (self.since is None or moment >= self.since) and (self.until is None or moment < self.until)


class BackfillParams(_Params):
    """Parameters of the backfill flow: the nightly stages day by day, then the weekly ones week by week."""

    start: date = Field(..., description="First day to process (event time, STRATAFLOW_TIMEZONE).")
    end: date = Field(..., description="Last day to process, inclusive.")
    stages: list[Stage] = Field(
        default_factory=lambda: list(DEFAULT_BACKFILL_STAGES),
        min_length=1,
        max_length=len(Stage),
        description="Stages to run. Per day: ingest, embed, extract; per week: rollup; at the end:"
        " hot_memory, reflect, expire. With reprocess, extract, rollup and hot_memory also redo the range.",
    )
    paths: Paths = Field(
        default_factory=list,
        description="Log files or directories. A file whose name holds a date (2024-03-05) is ingested on"
        " that day; the others on the first day. Empty: the inbox.",
    )
    namespace: Namespace | None = Field(
        None,
        description="Namespace for records that name none (and wins over theirs).",
    )
    reprocess: bool = Field(
        False,
        description="Also redo extraction, hot memory and weekly reports of the range that already ran,"
        " where the configured model or prompt version is not the one that produced them (after changing"
        " STRATAFLOW_EXTRACT_MODEL, for example). Changed values get new versions; manual edits stay.",
    )
    force: bool = Field(
        False,
        description="Redo everything in the range (implies reprocess), even what the configured model and"
        " prompt version produced, with fresh answers (the LLM result cache is not read).",
    )
    dry_run: bool = Field(
        False,
        description="Make no model call and write nothing: publish the plan (scopes, batches, prompt tokens,"
        " estimated cost for the configured models) as the run's backfill-plan artifact.",
    )

    @model_validator(mode="after")
    def _ordered(self) -> BackfillParams:
        if self.end < self.start:
            raise ValueError(f"end {self.end} is before start {self.start}")
        if (self.end - self.start).days > 3660:
            raise ValueError("a backfill covers at most ten years; split the range")
        return self


class DayPlan(BaseModel):
    """One backfill day: the date and the log files that belong to it."""

    day: date
    paths: list[str] = Field(default_factory=list)


class StagePlan(BaseModel):
    """What one LLM stage of a backfill would send to its model (a dry run's estimate)."""

    model: str
    prompt_version: str
    scopes: int = 0
    units: int = Field(0, description="scopes (extract, hot memory, reflect) or scope-weeks (rollup)")
    llm_calls: int = Field(0, description="requests the run would send, one per batch")
    already_current: int = Field(
        0,
        description="batches the configured model and prompt version already answered: a reprocess skips"
        " them (not in llm_calls and the token totals), force sends them again (in llm_calls)",
    )
    already_current_prompt_tokens: int = Field(
        0, description="prompt tokens of the skipped, already current batches (not sent)"
    )
    prompt_tokens: int = Field(0, description="prompt tokens of the requests the run would send")
    completion_tokens: int = Field(0, description="estimated from the stage's past calls")
    cost_usd: float | None = Field(None, description="None: the model is not in litellm's cost map")


class BackfillPlan(BaseModel):
    """A backfill dry run's plan: the work and its estimated spend, with no model call and no write."""

    start: date
    end: date
    reprocess: bool
    force: bool
    files_to_ingest: int = Field(0, description="log files the run would ingest (not in the estimate)")
    weeks: list[date] = Field(default_factory=list)
    stages: dict[str, StagePlan] = Field(default_factory=dict)
    llm_calls_planned: int = Field(0, description="requests the run would send")
    llm_calls_already_current: int = 0
    prompt_tokens_already_current: int = Field(0, description="prompt tokens of skipped, current requests")
    prompt_tokens_estimated: int = Field(0, description="prompt tokens of the requests the run would send")
    completion_tokens_estimated: int = 0
    cost_usd_estimated: float | None = None
    unpriced_models: list[str] = Field(default_factory=list)

    @property
    def days(self) -> int:
        """Days in the range [start, end]."""
        return (self.end - self.start).days + 1

    def range_summary(self) -> str:
        """The range's real size, e.g. "40 day(s) 2024-03-01..2024-04-09, 5 complete week(s)"."""
        return f"{self.days} day(s) {self.start}..{self.end}, {len(self.weeks)} complete week(s)"


class RunCounts(BaseModel):
    """The figures every run publishes (artifact table, pipeline_runs.counts, CLI summary)."""

    rows_read: int = 0
    rows_inserted: int = 0
    rows_updated: int = 0
    rows_quarantined: int = 0
    rows_embedded: int = 0
    encodes: int = 0
    llm_calls: int = 0
    llm_tokens: int = 0
    llm_cost_usd: float = 0.0
    l2_new: int = 0
    l2_changed: int = 0
    hot_summaries: int = 0
    weekly_reports_written: int = 0
    insights_written: int = 0
    assets_ingested: int = 0
    rows_expired: int = 0
    units_failed: int = 0  # LLM work units (scopes, scope-weeks) with no usable answer
    budget_stopped: bool = False


class RunSummary(BaseModel):
    """What a flow run returns: its pipeline run, its Prefect flow run, the counts and per-stage results."""

    flow: str
    run_id: str
    prefect_flow_run_id: str | None = None
    status: RunStatus
    counts: RunCounts
    stages: dict[str, dict[str, Any]] = Field(default_factory=dict)
    days: int = 0
    weeks: int = 0
    run_date: date | None = None
    errors: list[str] = Field(default_factory=list)
    plan: BackfillPlan | None = None
