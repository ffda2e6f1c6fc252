"""The one progress bar of long stages run from the CLI (ingest, embed, extract): rich on stderr, so stdout
stays for results. Inside a flow the stages run without it (Prefect's artifacts show progress there)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress_bar(label: str, total: int | None, enabled: bool = True) -> Iterator[Callable[[int], None]]:
    """A context giving advance(n): a bar of `total` units (a running count with a spinner when the total is
    unknown, None), or a no-op when disabled or there is nothing to do."""
    if not enabled or total == 0:
        yield lambda n: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns: tuple[ProgressColumn, ...]
    timing: ProgressColumn
    if total is None:
        columns = (SpinnerColumn(), TextColumn(label), BarColumn(), TextColumn("{task.completed:,} records"))
        timing = TimeElapsedColumn()
    else:
        columns = (TextColumn(label), BarColumn(), MofNCompleteColumn())
        timing = TimeRemainingColumn()
    with Progress(*columns, timing, console=Console(stderr=True), transient=total is None) as bar:
        job = bar.add_task(label, total=total)
        yield lambda n: bar.advance(job, n)
