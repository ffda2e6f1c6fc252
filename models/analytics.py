"""What a run of the dbt project returns: one row per node dbt ran (model, seed, test) and the outcome."""

from __future__ import annotations

from pydantic import BaseModel, Field


class DbtNodeResult(BaseModel):
    """One node of a dbt invocation, from its run_results.json."""

    name: str
    resource_type: str
    status: str  # success, error, skipped, pass, fail, warn
    execution_time_s: float = 0.0
    message: str | None = None


class AnalyticsRun(BaseModel):
    """A `dbt build` or `dbt docs generate` run: its exit, where dbt wrote, what each node did."""

    command: str
    success: bool
    target_dir: str
    log_path: str
    results: list[DbtNodeResult] = Field(default_factory=list)
    error: str | None = None

    def failed(self) -> list[DbtNodeResult]:
        return [r for r in self.results if r.status in ("error", "fail")]
