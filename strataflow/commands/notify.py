"""`strataflow notify setup`: the alert automation on an existing Prefect server."""

from __future__ import annotations

import os

import typer

from strataflow.commands.common import cli_errors, settings_or_exit
from strataflow.errors import UserError

notify_app = typer.Typer(
    help="Alerts: a Prefect automation that POSTs failed runs to a webhook.", no_args_is_help=True
)


@notify_app.command("setup")
def setup(
    webhook: str = typer.Option(
        None, "--webhook", help="URL to POST alerts to. Default: STRATAFLOW_ALERT_WEBHOOK."
    ),
    allow_private: bool = typer.Option(
        False,
        "--allow-private",
        help="Accept a private, link-local or loopback webhook address (default: refused; also "
        "STRATAFLOW_ALERT_WEBHOOK_ALLOW_PRIVATE=true).",
    ),
) -> None:
    """Register the `strataflow-alerts` automation on the Prefect server of PREFECT_API_URL: a POST to the
    webhook (JSON, Content-Type application/json: flow, deployment, strataflow run id, Prefect UI URL,
    state and message, counts, failed scopes) when a nightly, weekly, incremental, assets, backfill or
    analytics run ends Failed or Crashed, emits strataflow.run.completed_with_errors, or recovers (the next
    run of the flow completed cleanly). A private, link-local or loopback webhook address is refused unless
    --allow-private (a literal 127.0.0.1 is taken as meant). Rerun to change the URL (the automation is
    replaced, not added). `strataflow serve` does the same when STRATAFLOW_ALERT_WEBHOOK is set.

    Example: PREFECT_API_URL=http://127.0.0.1:4200/api strataflow notify setup --webhook https://hooks.example/x
    """
    from strataflow.ops import alerts
    from strataflow.ops.flow_runner import prefect_environment

    settings = settings_or_exit()
    with cli_errors():
        url = webhook or (settings.alert_webhook.get_secret_value() if settings.alert_webhook else None)
        if not url:
            raise UserError("no webhook: pass --webhook URL or set STRATAFLOW_ALERT_WEBHOOK")
        if not os.environ.get("PREFECT_API_URL"):
            raise UserError(
                "PREFECT_API_URL is not set: point it at the Prefect server that runs the deployments"
                " (an automation on a temporary server would vanish with it)"
            )
        prefect_environment(settings)
        allowed = allow_private or settings.alert_webhook_allow_private
        automation_id = alerts.register_alerts(url, allowed, settings.alert_late_after_minutes)
    typer.echo(f"automation {alerts.AUTOMATION_NAME} ({automation_id}) posts alerts to the webhook")


def register(app: typer.Typer) -> None:
    """Add `notify` to the strataflow app."""
    app.add_typer(notify_app, name="notify")
