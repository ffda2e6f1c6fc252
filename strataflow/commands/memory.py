"""`strataflow memory ...` (L2 CRUD), `strataflow context` (memory for a prompt), `strataflow report`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from strataflow.commands.common import cli_errors, settings_or_exit
from strataflow.errors import UserError

memory_app = typer.Typer(
    help="Memory items (L2): save (create), update, delete, get, list, search.", no_args_is_help=True
)

NAMESPACE = typer.Option(..., "--namespace", "-n", help="Namespace (project, agent or app).")
SUBJECT = typer.Option(..., "--subject", "-s", help="Subject id: the user the memory is about.")
AGENT = typer.Option(None, "--agent", help="Agent id: scope the item to one agent.")
ITEM_ID = typer.Option(None, "--id", help="Item id (instead of --kind and --key).")
KIND_HELP = (
    "fact, preference, intent, meta, status, decision, feedback, reference, observation (or user, project)."
)
KIND = typer.Option(None, "--kind", help=KIND_HELP)
REPORT_OUT = typer.Option(Path("report.html"), "--out", "-o", help="Where to write the HTML page.")
KEY = typer.Option(None, "--key", help="snake_case key, e.g. age or job_title.")


def _parse_value(raw: str | None) -> Any:
    """JSON when it parses (30 -> number, [..] -> list), else the text itself."""
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _emit(payload: Any) -> None:
    typer.echo(json.dumps(payload, ensure_ascii=False, default=str))


def _write(action: Any) -> Any:
    """Run one memory API call in a committed transaction; map its errors to a clean exit."""
    from strataflow.db.engine import engine_for
    from strataflow.memory.api import MemoryConflict, MemoryForbidden, MemoryNotFound

    settings = settings_or_exit()
    with cli_errors():
        try:
            with engine_for(settings).begin() as conn:
                return action(conn)
        except (MemoryNotFound, MemoryConflict, MemoryForbidden, ValueError) as exc:
            raise UserError(str(exc)) from None


def _item_id(
    conn: Any,
    namespace: str,
    subject: str | None,
    item_id: int | None,
    kind: str | None,
    key: str | None,
    agent: str | None,
    include_deleted: bool = False,
) -> int:
    """The id given, or the id of the subject's item of this kind and key that the agent sees."""
    from strataflow.memory.api import find_memory
    from strataflow.memory.item_fields import normalize_key

    if item_id is not None:
        return item_id
    if kind is None or key is None or subject is None:
        raise ValueError("give --id, or --subject with --kind and --key")
    found = find_memory(
        conn, namespace, subject, kind, normalize_key(key), agent_id=agent, include_deleted=include_deleted
    )
    return found.id


@memory_app.command("save")
def save(
    namespace: str = NAMESPACE,
    subject: str = SUBJECT,
    kind: str = typer.Option(
        ..., "--kind", help="Memory kind (fact, preference, ...; seed 003 user, project)."
    ),
    key: str = typer.Option(..., "--key", help="snake_case key, e.g. age."),
    value: str = typer.Option(..., "--value", help='The value; JSON when it parses (30, ["a"]), else text.'),
    statement: str = typer.Option(
        None, "--statement", help="The statement in the user's words (default: a text value itself)."
    ),
    agent: str = AGENT,
    category: str = typer.Option(
        None, "--category", help="Category (basic, career, immigration, family, ...)."
    ),
    importance: int = typer.Option(None, "--importance", min=0, max=100, help="0-100; default by kind."),
) -> None:
    """Create a memory item by hand (versioned, source manual; extraction will not overwrite it). A key that
    the subject (and agent) already has is refused: change it with `strataflow memory update`.

    Example: strataflow memory save -n demo -s u1 --kind fact --key age --value 30 --statement "I am 30"
    """
    from strataflow.memory.api import MemoryConflict, create_memory
    from strataflow.memory.item_fields import normalize_key

    def action(conn: Any) -> Any:
        try:
            return create_memory(
                conn, namespace, subject, kind, normalize_key(key), _parse_value(value), statement=statement,
                agent_id=agent, category=category, importance=importance, settings=settings_or_exit(),
            )  # fmt: skip
        except MemoryConflict as exc:
            raise UserError(
                f"{exc}: strataflow memory update -n {namespace} -s {subject} --id {exc.item_id} --value ..."
            ) from None

    _emit(_write(action).model_dump(mode="json"))


@memory_app.command("update")
def update(
    namespace: str = NAMESPACE,
    subject: str = SUBJECT,
    item_id: int = ITEM_ID,
    kind: str = KIND,
    key: str = KEY,
    value: str = typer.Option(None, "--value", help="New value (JSON when it parses)."),
    statement: str = typer.Option(None, "--statement", help="New statement."),
    category: str = typer.Option(None, "--category", help="New category."),
    importance: int = typer.Option(None, "--importance", min=0, max=100, help="New importance 0-100."),
    agent: str = AGENT,
) -> None:
    """Change an existing memory item (a new version, source manual).

    Example: strataflow memory update -n demo -s u1 --kind fact --key age --value 31
    """
    from strataflow.memory.api import UNSET, update_memory

    if value is None and statement is None and category is None and importance is None:
        typer.echo(
            "error: nothing to update: give --value, --statement, --category or --importance", err=True
        )
        raise typer.Exit(1)
    result = _write(
        lambda conn: update_memory(
            conn,
            namespace,
            _item_id(conn, namespace, subject, item_id, kind, key, agent),
            agent_id=agent,
            value=UNSET if value is None else _parse_value(value),
            statement=statement,
            category=category,
            importance=importance,
            settings=settings_or_exit(),
        )
    )
    _emit(result.model_dump(mode="json"))


@memory_app.command("delete")
def delete(
    namespace: str = NAMESPACE,
    subject: str = SUBJECT,
    item_id: int = ITEM_ID,
    kind: str = KIND,
    key: str = KEY,
    agent: str = AGENT,
) -> None:
    """Delete a memory item (kept in history as a deleted version).

    Example: strataflow memory delete -n demo -s u1 --kind fact --key age
    """
    from strataflow.memory.api import delete_memory

    result = _write(
        lambda conn: delete_memory(
            conn, namespace, _item_id(conn, namespace, subject, item_id, kind, key, agent), agent_id=agent
        )
    )
    _emit(result.model_dump(mode="json"))


@memory_app.command("get")
def get(
    namespace: str = NAMESPACE,
    subject: str = typer.Option(None, "--subject", "-s", help="Subject id (needed with --kind/--key)."),
    item_id: int = ITEM_ID,
    kind: str = KIND,
    key: str = KEY,
    agent: str = AGENT,
    history: bool = typer.Option(False, "--history", help="Also print every version of the item."),
) -> None:
    """Print one memory item as JSON (with --history, its versions too).

    Example: strataflow memory get -n demo -s u1 --kind fact --key age --history
    """
    from strataflow.memory.api import get_memory, memory_history

    def action(conn: Any) -> dict[str, Any]:
        found = _item_id(conn, namespace, subject, item_id, kind, key, agent, include_deleted=True)
        item = get_memory(conn, namespace, found, agent_id=agent, include_deleted=True)
        payload = item.model_dump(mode="json")
        if history:
            versions = memory_history(conn, namespace, item.id, agent_id=agent)
            payload["history"] = [version.model_dump(mode="json") for version in versions]
        return payload

    _emit(_write(action))


@memory_app.command("list")
def list_(
    namespace: str = NAMESPACE,
    subject: str = typer.Option(None, "--subject", "-s", help="Subject id; all subjects when omitted."),
    kind: str = KIND,
    agent: str = AGENT,
    include_deleted: bool = typer.Option(False, "--include-deleted", help="Also list deleted items."),
    limit: int = typer.Option(100, "--limit", min=1, max=10000, help="At most this many items."),
) -> None:
    """List memory items, one JSON object per line, newest first.

    Example: strataflow memory list -n demo -s u1 --kind fact
    """
    from strataflow.memory.api import list_memories

    page = _write(
        lambda conn: list_memories(
            conn, namespace, subject, agent_id=agent, type=kind, include_deleted=include_deleted, limit=limit
        )
    )
    for item in page.entries:
        _emit(item.model_dump(mode="json"))


@memory_app.command("search")
def search(
    namespace: str = NAMESPACE,
    query: str = typer.Option(..., "--query", "-q", help="Words to look for (English or Chinese)."),
    subject: str = typer.Option(None, "--subject", "-s", help="Subject id; all subjects when omitted."),
    kind: str = KIND,
    agent: str = AGENT,
    k: int = typer.Option(10, "--k", min=1, max=1000, help="At most this many hits."),
) -> None:
    """Search memory items (the retrieval ranking: full text in English and Chinese, names, dense
    similarity), one JSON object per line, best first.

    Example: strataflow memory search -n demo -s u1 -q "工作 公司"
    """
    from strataflow.retrieval.item_search import search_memories

    hits = _write(
        lambda conn: search_memories(
            conn, settings_or_exit(), namespace, query, subject, agent_id=agent, type=kind, limit=k
        )
    )
    for hit in hits:
        _emit(hit.model_dump(mode="json"))


def context(
    namespace: str = NAMESPACE,
    subject: str = SUBJECT,
    query: str = typer.Option(..., "--query", "-q", help="The user's message the context is for."),
    budget: int = typer.Option(2000, "--budget", min=1, help="Token budget (litellm.token_counter)."),
    fmt: str = typer.Option("text", "--format", help="text (a <memory-context> block) or json."),
    intent: str = typer.Option(
        None, "--intent", help="QA_QUERY, QC_TASK, PROTOCOL_QA, GENERAL (default: from the query)."
    ),
    profile: str = typer.Option(
        "none", "--profile", help="Seed 002 documents to include: user, work, both, none."
    ),
    agent: str = typer.Option(
        None, "--agent", help="Seed 003 agent scope: its own, shared and unscoped items."
    ),
) -> None:
    """Print the memory context for a prompt: chosen by the query's intent, within the token budget.

    Example: strataflow context -n demo -s u1 -q "what happened last week?" --budget 1500 --profile user
    """
    from strataflow.db.engine import engine_for
    from strataflow.retrieval.context import build_context

    if fmt not in ("text", "json"):
        typer.echo(f"error: --format must be text or json, not {fmt!r}", err=True)
        raise typer.Exit(1)
    settings = settings_or_exit()
    with cli_errors():
        try:
            with engine_for(settings).connect() as conn:
                result = build_context(
                    conn, settings, namespace, subject, query, budget_tokens=budget, fmt=fmt,  # type: ignore[arg-type]
                    intent=intent, profile=profile, agent_id=agent,
                )  # fmt: skip
        except ValueError as exc:
            raise UserError(str(exc)) from None
    typer.echo(result.text)


def report(
    out: Path = REPORT_OUT,
    namespace: str = typer.Option(None, "--namespace", "-n", help="Only this namespace (default: all)."),
    days: int = typer.Option(
        None, "--days", min=1, max=36500, help="Only the last N days of event time (default: all)."
    ),
) -> None:
    """Write one static HTML page (offline, no scripts from the web) with plots on event weeks and the key
    tables; --namespace limits every plot and table to one namespace.

    Example: strataflow report --out report.html --namespace acme
    """
    from strataflow.db.engine import engine_for
    from strataflow.ops.report import write_report

    settings = settings_or_exit()
    with cli_errors():
        try:
            with engine_for(settings).connect() as conn:
                result = write_report(conn, settings, out, namespace=namespace, days=days)
        except OSError as exc:
            raise UserError(f"cannot write the report to {out}: {exc}") from None
    typer.echo(f"wrote {result.path} ({result.count_plots} plots, {result.count_points} data points)")


def register(app: typer.Typer) -> None:
    """Add this area's commands to the strataflow app."""
    app.add_typer(memory_app, name="memory")
    app.command("context")(context)
    app.command("report")(report)
