"""`strataflow extract` (L1 -> L2 through the LLM gateway) and `strataflow profile ...` (seeds 000, 002)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import typer

from strataflow.commands.common import cli_errors, recorded_run, report_failures, settings_or_exit
from strataflow.errors import UserError

profile_app = typer.Typer(
    help="Seed 002 user/work profile documents and the seed 000 summary.", no_args_is_help=True
)

NAMESPACE = typer.Option(..., "--namespace", "-n", help="Namespace of the subject.")
SUBJECT = typer.Option(..., "--subject", "-s", help="The subject (owner) id.")
DOC_TYPE = typer.Option("user", "--doc", "-d", help="Document type: user or work.")
FIELDS = typer.Option(
    None, "--set", help="key=value (value read as JSON when it parses, else as text); repeatable."
)
FIELDS_JSON = typer.Option(None, "--json", help="The fields as one JSON object (merged with --set).")


def extract(
    namespace: str = typer.Option(None, "--namespace", "-n", help="Only this namespace (default: all)."),
    reprocess: bool = typer.Option(
        False, "--reprocess", help="Re-extract messages already extracted (with --since)."
    ),
    since: str = typer.Option(
        None, "--since", help="With --reprocess: messages with event time on or after this."
    ),
    batch: bool = typer.Option(
        False,
        "--batch",
        help="Send the requests through the provider's batch API (about half the price, answers within "
        "24 h; an OpenAI-compatible model), wait for the batch and apply its answers.",
    ),
    wait: bool = typer.Option(
        True,
        "--wait/--no-wait",
        help="With --batch: --no-wait submits the batch and returns; a later `extract --batch` collects it.",
    ),
) -> None:
    """Extract durable L2 memory items from new L1 messages, one LLM call per scope batch.

    Only messages past each scope's watermark are sent, so a second run makes no LLM calls. A budget stop
    (STRATAFLOW_LLM_BUDGET_TOKENS / _USD) ends the run cleanly with exit code 0; the next run resumes. A
    scope whose model call fails is named (by hash) on stderr and retried by the next run; the run ends
    completed_with_errors (exit 0), or failed (exit 1) when every scope failed.

    With --batch the requests go to the provider as one batch (STRATAFLOW_EXTRACT_MODEL=openai/<model>;
    STRATAFLOW_LLM_API_BASE for another OpenAI-compatible server): the command polls every
    STRATAFLOW_LLM_BATCH_POLL_S until it ends (at most STRATAFLOW_LLM_BATCH_WAIT_S), then applies the
    answers; scopes left unanswered are counted and sent by the next run.

    Example: strataflow extract --namespace consult
    """
    from strataflow.pipeline.extract import extract_new
    from strataflow.timeutil import parse_event_time

    settings = settings_or_exit()
    with cli_errors():
        if reprocess != (since is not None):
            raise UserError(
                "--reprocess and --since go together: strataflow extract --reprocess --since 2026-03-01"
            )
        try:
            since_at = parse_event_time(since, settings.tz) if since else None
        except ValueError as exc:
            raise UserError(f"--since: {exc}") from None
        if batch and reprocess:
            raise UserError("--batch extracts new messages; run --reprocess without it")
        if batch:
            from strataflow.pipeline.extract_batch import batch_model

            batch_model(settings)  # an extraction model with a batch API, or a clear error now

    def run(run_id: uuid.UUID) -> Any:
        if batch:
            return _extract_batch(settings, run_id, namespace, wait)
        return extract_new(settings, run_id=run_id, namespace=namespace, reprocess_since=since_at)

    result = recorded_run(
        settings, "extract", {"namespace": namespace, "since": since, "batch": batch}, namespace, run
    )
    typer.echo(
        f"scopes {result.scopes}, messages {result.messages}, llm calls {result.llm_calls} "
        f"(cache hits {result.cache_hits}, tokens {result.tokens}), items new {result.items_new}, "
        f"changed {result.items_changed}, unchanged {result.items_unchanged}, "
        f"kept older {result.items_kept_older}"
    )
    for conflict in result.manual_conflicts:
        typer.echo(
            f"kept manual value of {conflict['subject_id']} {conflict['kind']}:{conflict['key']}; extracted "
            f"{json.dumps(conflict['extracted_value'], ensure_ascii=False)} went to history",
            err=True,
        )
    if result.budget_stopped:
        typer.echo("budget spent: stopped cleanly; the next run resumes where this one stopped", err=True)
    report_failures(result)


def _extract_batch(settings: Any, run_id: uuid.UUID, namespace: str | None, wait: bool) -> Any:
    """Submit the pending requests as a provider batch, wait for every open batch (a line per poll on
    stderr), collect the ended ones and apply their answers (strataflow/pipeline/extract_batch.py)."""
    from models.results import ExtractResult
    from strataflow.pipeline.extract import extract_new
    from strataflow.pipeline.extract_batch import (
        collect_ended_batches,
        submit_extract_batch,
        wait_for_batches,
    )

    batch_id, requests = submit_extract_batch(settings, run_id, namespace)
    if batch_id is not None:
        typer.echo(f"submitted batch {batch_id} with {requests} request(s)", err=True)

    def show(states: list[Any]) -> None:
        for state in states:
            done = state.completed + state.failed
            line = f"batch {state.batch_id}: {state.provider_status}, {done} of {state.total} done"
            typer.echo(line, err=True)

    if not wait:
        typer.echo("not waiting: a later `strataflow extract --batch` collects and applies it", err=True)
        return ExtractResult()
    states = wait_for_batches(settings, settings.llm_batch_poll_s, settings.llm_batch_wait_s, show)
    running = [state.batch_id for state in states if not state.ended]
    if running:
        typer.echo(f"still running after STRATAFLOW_LLM_BATCH_WAIT_S: {', '.join(running)}", err=True)
    batches = collect_ended_batches(settings)
    for collected in batches:
        typer.echo(
            f"batch {collected.batch_id}: {collected.answered} answered, {collected.invalid} invalid, "
            f"{collected.missing} missing (sent by the next run), ${collected.cost_usd:.4f} (batch price)",
            err=True,
        )
    result = extract_new(settings, run_id=run_id, namespace=namespace, answers_only=True)
    # The requests were answered in the batch: its ledger rows are this run's calls.
    result.llm_calls += sum(c.answered + c.invalid + c.failed for c in batches)
    result.tokens += sum(c.tokens for c in batches)
    result.cost_usd = round(result.cost_usd + sum(c.cost_usd for c in batches), 6)
    return result


@profile_app.command("get")
def profile_get(
    namespace: str = NAMESPACE,
    subject: str = SUBJECT,
    doc: str = typer.Option("all", "--doc", "-d", help="user, work, or all (both, with their status)."),
) -> None:
    """Print a subject's seed 002 profile document(s) as JSON (entries carry meta: source, confidence, time).

    Example: strataflow profile get --namespace consult --subject client-a --doc user
    """
    from strataflow.memory.profiles import get_profile, get_profiles

    if doc == "all":
        typer.echo(json.dumps(_in_transaction(lambda conn: get_profiles(conn, namespace, subject)), indent=2,
                              ensure_ascii=False))  # fmt: skip
        return
    _print(_in_transaction(lambda conn: get_profile(conn, namespace, subject, doc)))


@profile_app.command("put")
def profile_put(
    namespace: str = NAMESPACE,
    subject: str = SUBJECT,
    doc: str = DOC_TYPE,
    fields: list[str] = FIELDS,
    fields_json: str = FIELDS_JSON,
) -> None:
    """Replace a profile document (seed 002 PUT): fields left out take their defaults; changes become manual.

    The content is validated against UserMemoryContent / WorkProfileContent; an error names the bad field.
    Example: strataflow profile put -n consult -s client-a --doc user --json '{"occupation": "产品经理"}'
    """
    from strataflow.memory.profiles import put_profile

    values = _fields(fields, fields_json)
    _print(_in_transaction(lambda conn: put_profile(conn, namespace, subject, doc, values)))


@profile_app.command("patch")
def profile_patch(
    namespace: str = NAMESPACE,
    subject: str = SUBJECT,
    doc: str = DOC_TYPE,
    fields: list[str] = FIELDS,
    fields_json: str = FIELDS_JSON,
) -> None:
    """Change some fields of a profile document (seed 002 PATCH: objects merge, lists replace).

    What you change becomes manual, and extraction never overwrites it.
    Example: strataflow profile patch -n consult -s client-a --set occupation="data engineer"
    """
    from strataflow.memory.profiles import patch_profile

    values = _fields(fields, fields_json)
    _print(_in_transaction(lambda conn: patch_profile(conn, namespace, subject, doc, values)))


@profile_app.command("status")
def profile_status(
    namespace: str = NAMESPACE,
    subject: str = SUBJECT,
    doc: str = DOC_TYPE,
    status: str = typer.Argument(..., help="active or disabled (either case)."),
) -> None:
    """Mark a profile document active or disabled (a disabled one is left out of contexts and tool answers).

    Example: strataflow profile status -n consult -s client-a --doc work disabled
    """
    from strataflow.memory.profiles import set_profile_status

    document = _in_transaction(lambda conn: set_profile_status(conn, namespace, subject, doc, status))
    typer.echo(f"{namespace}/{subject} {doc} profile: {document.status}")


@profile_app.command("summarize")
def profile_summarize(namespace: str = NAMESPACE, subject: str = SUBJECT) -> None:
    """Print the seed 000 summary: the four sections, completeness and a narrative in the subject's language.

    Example: strataflow profile summarize --namespace consult --subject client-a
    """
    from strataflow.memory.user_memory import summarize

    _print(_in_transaction(lambda conn: summarize(conn, namespace, subject)))


def _in_transaction(work: Any) -> Any:
    from strataflow.db.engine import engine_for

    settings = settings_or_exit()
    with cli_errors():
        try:
            with engine_for(settings).begin() as conn:
                return work(conn)
        except ValueError as exc:
            raise UserError(str(exc)) from None


def _fields(pairs: list[str] | None, raw_json: str | None) -> dict[str, Any]:
    values: dict[str, Any] = {}
    with cli_errors():
        if raw_json:
            try:
                loaded = json.loads(raw_json)
            except json.JSONDecodeError as exc:
                raise UserError(f"--json is not valid JSON: {exc}") from None
            if not isinstance(loaded, dict):
                raise UserError("--json must be a JSON object of field: value")
            values.update(loaded)
        for pair in pairs or []:
            key, sep, raw = pair.partition("=")
            if not sep or not key.strip():
                raise UserError(f"--set {pair!r}: expected key=value")
            try:
                values[key.strip()] = json.loads(raw)
            except json.JSONDecodeError:
                values[key.strip()] = raw
        if not values:
            raise UserError("give fields with --set key=value or --json '{...}'")
    return values


def _print(model: Any) -> None:
    if model is None:
        typer.echo("{}")
        return
    typer.echo(json.dumps(model.model_dump(mode="json"), indent=2, ensure_ascii=False))


def register(app: typer.Typer) -> None:
    """Add this area's commands to the strataflow app."""
    app.command("extract")(extract)
    app.add_typer(profile_app, name="profile")
