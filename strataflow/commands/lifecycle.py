"""`strataflow rollup`, `reflect`, `expire`, `forget`: L3, guarded L1 expiry, data-subject deletion."""

from __future__ import annotations

from datetime import date

import typer

from strataflow.commands.common import recorded_run, report_failures, settings_or_exit


def rollup(
    week_start: str = typer.Option(
        None, "--week-start", help="Roll up only the ISO week holding this date (YYYY-MM-DD)."
    ),
    namespace: str = typer.Option(None, "--namespace", "-n", help="Only this namespace (default: all)."),
) -> None:
    """Write weekly reports (L3): one per scope and ISO week, Monday to Sunday in STRATAFLOW_TIMEZONE.

    Without --week-start, catches up every complete week with messages and no current report, including
    weeks a late backfill changed. An unchanged week is not rewritten and costs no LLM call.

    Example: strataflow rollup --week-start 2026-11-02
    """
    from strataflow.pipeline.rollup import rollup_weeks

    monday = _parse_date(week_start, "--week-start") if week_start else None
    settings = settings_or_exit()
    result = recorded_run(
        settings,
        "rollup",
        {"week_start": week_start, "namespace": namespace},
        namespace,
        lambda run_id: rollup_weeks(settings, week_start=monday, run_id=run_id, namespace=namespace),
        user_errors=(ValueError,),
    )
    typer.echo(
        f"weeks considered {result.weeks_considered}: reports written {result.reports_written}, "
        f"metrics refreshed {result.metrics_refreshed}, unchanged {result.unchanged}, "
        f"skipped (expired) {result.skipped_expired}, "
        f"failed {result.units_failed}"
    )
    typer.echo(f"messages read {result.messages_read}, left out of prompts {result.messages_sampled_out}")
    if result.budget_stopped:
        typer.echo("stopped by the LLM budget: the next run resumes", err=True)
    report_failures(result)


def reflect(
    namespace: str = typer.Option(None, "--namespace", "-n", help="Only this namespace (default: all)."),
) -> None:
    """Derive insights (L3) from L2 items not yet reflected; a changed attribute closes its old insight.

    Example: strataflow reflect
    """
    from strataflow.pipeline.reflect import reflect_pending

    settings = settings_or_exit()
    result = recorded_run(
        settings,
        "reflect",
        {"namespace": namespace},
        namespace,
        lambda run_id: reflect_pending(settings, run_id=run_id, namespace=namespace),
        user_errors=(ValueError,),
    )
    typer.echo(
        f"scopes {result.scopes}, items reflected {result.items_reflected}: insights created "
        f"{result.insights_created}, updated {result.insights_updated}, "
        f"unchanged {result.insights_unchanged}, "
        f"kept as history {result.insights_historical}"
    )
    if result.budget_stopped:
        typer.echo("stopped by the LLM budget: the next run resumes", err=True)
    report_failures(result)


def expire(
    dry_run: bool = typer.Option(False, "--dry-run", help="Report what would go; change nothing."),
    force: bool = typer.Option(
        False, "--force", help="Also remove rows no weekly report covers (needs --reason)."
    ),
    reason: str = typer.Option(
        None, "--reason", help="Why --force is needed; logged and stored in the report."
    ),
    namespace: str = typer.Option(None, "--namespace", "-n", help="Only this namespace (default: all)."),
) -> None:
    """Remove L1 rows past expires_at: drop whole weekly partitions, delete the rest row by row.

    A row goes only when a weekly report covers its week (run `strataflow rollup` first), unless --force
    with --reason. Every run, --dry-run included, writes a deletion report.

    Example: strataflow expire --dry-run
    """
    from strataflow.pipeline.expire import expire_l1

    if force and not (reason or "").strip():
        typer.echo(
            "error: --force needs --reason TEXT (it is logged and kept in the deletion report)", err=True
        )
        raise typer.Exit(1)
    settings = settings_or_exit()
    parameters = {"dry_run": dry_run, "force": force, "reason": reason, "namespace": namespace}
    result = recorded_run(
        settings,
        "expire",
        parameters,
        namespace,
        lambda run_id: expire_l1(
            settings, dry_run=dry_run, force=force, reason=reason, run_id=run_id, namespace=namespace
        ),
        user_errors=(ValueError,),
    )
    verb = "would remove" if dry_run else "removed"
    typer.echo(
        f"expired {result.expired_rows} row(s): {verb} {result.removed_rows} "
        f"({result.dropped_rows} by dropping "
        f"{len(result.partitions_dropped)} partition(s), {result.deleted_rows} by delete), guarded "
        f"{result.guarded_rows}"
    )
    for name, counts in result.by_namespace.items():
        typer.echo(f"  {name}: " + ", ".join(f"{key} {value}" for key, value in counts.items()))
    if result.partitions_dropped:
        typer.echo(
            "partitions " + ("to drop: " if dry_run else "dropped: ") + ", ".join(result.partitions_dropped)
        )
    if result.archive_path:
        typer.echo(f"archived to {result.archive_path}")
    typer.echo(f"deletion report {result.report_id}")
    from strataflow.pipeline.forget import NOT_REACHED

    typer.echo("not reached (rotate or expire them): " + "; ".join(NOT_REACHED))


def forget(
    namespace: str = typer.Option(..., "--namespace", "-n", help="Namespace of the subject."),
    subject: str = typer.Option(..., "--subject", "-s", help="The subject_id to forget."),
) -> None:
    """Remove every trace of one data subject (L1, L2 with history, L3, profiles, quarantine, caches,
    archives) in one transaction, and write a deletion report with counts (it stores a hash, not the id).

    Example: strataflow forget --namespace acme --subject user-42
    """
    from strataflow.hashes import subject_hash
    from strataflow.pipeline.forget import forget_subject

    settings = settings_or_exit()
    if not namespace.strip() or not subject.strip():
        typer.echo("error: --namespace and --subject must not be empty", err=True)
        raise typer.Exit(1)
    parameters = {"subject_sha256": subject_hash(namespace, subject)}  # never the id itself
    result = recorded_run(
        settings,
        "forget",
        parameters,
        namespace,
        lambda run_id: forget_subject(settings, namespace, subject, run_id=run_id),
        user_errors=(ValueError,),
    )
    typer.echo(f"removed {result.total} row(s) of subject sha256:{result.subject_hash[:12]}… in {namespace}")
    typer.echo(", ".join(f"{table} {count}" for table, count in result.counts.items()))
    typer.echo(f"deletion report {result.report_id}")
    from strataflow.pipeline.forget import NOT_REACHED

    typer.echo("not reached (rotate or expire them): " + "; ".join(NOT_REACHED))


def _parse_date(value: str, option: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        typer.echo(f"error: {option} {value!r}: expected a date as YYYY-MM-DD", err=True)
        raise typer.Exit(1) from None


def register(app: typer.Typer) -> None:
    """Add rollup, reflect, expire and forget."""
    app.command("rollup")(rollup)
    app.command("reflect")(reflect)
    app.command("expire")(expire)
    app.command("forget")(forget)
