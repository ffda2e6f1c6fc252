"""Seed protocols on the command line: `strataflow hot-memory refresh` (seed 001), `strataflow save-info` and
`strataflow user-context` (seed 000). Each parses its arguments and calls one library function."""

from __future__ import annotations

import json
from typing import Any

import typer

from strataflow.commands.common import cli_errors, recorded_run, report_failures, settings_or_exit
from strataflow.errors import UserError

hot_memory_app = typer.Typer(
    help="Seed 001 hot memory: the summary and typed items of a scope.", no_args_is_help=True
)

NAMESPACE = typer.Option(..., "--namespace", "-n", help="Namespace of the subject.")
SUBJECT = typer.Option(..., "--subject", "-s", help="The subject (user) id.")


@hot_memory_app.command("refresh")
def hot_memory_refresh(
    namespace: str = typer.Option(None, "--namespace", "-n", help="Only this namespace (default: all)."),
    subject: str = typer.Option(None, "--subject", "-s", help="Only this subject."),
) -> None:
    """Refresh the hot summary and its typed items (status, decision, preference) of scopes with new messages.

    One LLM call per scope with messages past its hot-memory watermark; a second run makes none.
    Example: strataflow hot-memory refresh -n team -s proj_atlas
    """
    from strataflow.pipeline.hot_memory import refresh_hot_memory

    settings = settings_or_exit()
    result = recorded_run(
        settings,
        "hot_memory",
        {"namespace": namespace, "subject": subject},
        namespace,
        lambda run_id: refresh_hot_memory(settings, run_id, namespace, subject_id=subject),
    )
    typer.echo(
        f"scopes {result.scopes}, summaries written {result.summaries_written}, typed items written "
        f"{result.items_written}, llm calls {result.llm_calls} (cache hits {result.cache_hits})"
    )
    if result.budget_stopped:
        typer.echo("budget spent: stopped cleanly; the next run resumes where this one stopped", err=True)
    report_failures(result)


def save_info(
    namespace: str = NAMESPACE,
    subject: str = SUBJECT,
    user_message: str = typer.Option(..., "--user", "-u", help="The user's latest message."),
    assistant_message: str = typer.Option(None, "--assistant", "-a", help="The assistant's latest reply."),
    existing: str = typer.Option(None, "--existing", help="Already known fields as a JSON object (skipped)."),
) -> None:
    """Extract one exchange now and save what the user stated (seed 000 save_info); prints the result JSON.

    Same prompt, schema, model and LLM ledger as `strataflow extract`; the same exchange twice saves nothing.
    Example: strataflow save-info -n consulting -s c9 -u "我今年三十多岁，在上海做产品经理"
    """
    from strataflow.db.engine import engine_for
    from strataflow.llm.gateway import LLMError
    from strataflow.pipeline.save_info import save_exchange

    settings = settings_or_exit()
    known = _json_object(existing, "--existing")
    with cli_errors():
        try:
            with engine_for(settings).begin() as conn:
                result = save_exchange(
                    conn, settings, namespace, subject, user_message, assistant_message, known
                )
        except (ValueError, LLMError) as exc:
            raise UserError(str(exc)) from None
    typer.echo(result.model_dump_json(indent=2))


def user_context(
    namespace: str = NAMESPACE,
    subject: str = SUBJECT,
    query: str = typer.Option(..., "--query", "-q", help="What the memories are for."),
    limit: int = typer.Option(20, "--limit", min=1, max=200, help="Memories to return."),
) -> None:
    """Print a subject's memories for a query, its profile summary and memory count (seed 000 load_context).

    Example: strataflow user-context -n consulting -s client_03 -q "用户的基本信息和移民意向"
    """
    from strataflow.db.engine import engine_for
    from strataflow.retrieval.user_context import get_user_context

    settings = settings_or_exit()
    with cli_errors(), engine_for(settings).connect() as conn:
        result = get_user_context(conn, settings, namespace, subject, query, limit=limit)
    typer.echo(result.model_dump_json(indent=2))


def _json_object(raw: str | None, option: str) -> dict[str, Any] | None:
    if not raw:
        return None
    with cli_errors():
        try:
            loaded = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise UserError(f"{option} is not valid JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise UserError(f"{option} must be a JSON object of field: value")
    return loaded


def register(app: typer.Typer) -> None:
    """Add this area's commands to the strataflow app."""
    app.add_typer(hot_memory_app, name="hot-memory")
    app.command("save-info")(save_info)
    app.command("user-context")(user_context)
