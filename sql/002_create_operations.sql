-- Operations tables: runs, watermarks, quarantine, the LLM ledger and cache, the embedding cache, deletion reports.

create table pipeline_runs (
    run_id uuid primary key,
    flow text not null,                      -- nightly, weekly, backfill, assets, or a CLI stage (ingest, extract, ...)
    namespace text,                          -- null when the run spans every namespace
    prefect_flow_run_id uuid,
    status text not null default 'running' check (status in ('running', 'completed', 'failed', 'budget_stopped')),
    parameters jsonb not null default '{}'::jsonb,
    counts jsonb not null default '{}'::jsonb,
    error text,
    started_at timestamptz not null default now(),
    finished_at timestamptz
);
create index pipeline_runs_flow_started_idx on pipeline_runs (flow, started_at desc);

-- What a stage has done per scope. position is the ingest sequence reached (extraction, rollup),
-- checksum the file checksum (file sources), value anything else the stage needs (e.g. a SQL updated_at).
create table watermarks (
    stage text not null,
    namespace text not null,
    scope text not null,                     -- a subject_id, a source name or a file path
    position bigint,
    checksum text,
    value jsonb not null default '{}'::jsonb,
    run_id uuid,
    updated_at timestamptz not null default now(),
    primary key (stage, namespace, scope)
);

create table quarantine (
    quarantine_id bigint generated always as identity primary key,
    run_id uuid,
    namespace text,
    subject_id text,                         -- when the bad record names one (so forget can find it)
    source text not null,
    position text not null,                  -- line number, row number or turn id inside the source
    field text,                              -- the field the error names, null for a whole-record error
    reason text not null,                    -- short machine-readable reason (missing_field, bad_timestamp, ...)
    error text not null,                     -- the sentence a person reads
    raw_record text not null,
    created_at timestamptz not null default now()
);
create index quarantine_namespace_subject_idx on quarantine (namespace, subject_id);
create index quarantine_created_idx on quarantine (created_at);

-- One row per request sent to a model (every retry and every repair is its own row).
create table llm_calls (
    call_id bigint generated always as identity primary key,
    run_id uuid,
    stage text not null,
    namespace text,
    subject_id text,
    model text not null,
    prompt_version text not null,
    input_hash text not null,
    attempt integer not null default 1,
    prompt_tokens integer not null default 0,
    completion_tokens integer not null default 0,
    cost_usd numeric(12, 6),
    latency_ms integer,
    outcome text not null,                   -- ok, invalid_output, rate_limited, server_error, timeout, error
    error text,
    created_at timestamptz not null default now()
);
create index llm_calls_run_idx on llm_calls (run_id);
create index llm_calls_created_idx on llm_calls (created_at);
create index llm_calls_scope_idx on llm_calls (namespace, subject_id);

-- Validated LLM results, so the same work is never paid for twice.
create table llm_cache (
    stage text not null,
    prompt_version text not null,
    model text not null,
    input_hash text not null,
    namespace text,
    subject_id text,
    response jsonb not null,
    created_at timestamptz not null default now(),
    primary key (stage, prompt_version, model, input_hash)
);
create index llm_cache_scope_idx on llm_cache (namespace, subject_id);

create table deletion_reports (
    report_id bigint generated always as identity primary key,
    run_id uuid,
    kind text not null check (kind in ('expire', 'forget', 'asset_replace')),
    namespace text,
    subject_id text,
    dry_run boolean not null default false,
    forced boolean not null default false,
    reason text,
    counts jsonb not null default '{}'::jsonb,
    partitions_dropped text[] not null default '{}',
    oldest_event_at timestamptz,
    newest_event_at timestamptz,
    archive_path text,
    created_at timestamptz not null default now()
);
create index deletion_reports_created_idx on deletion_reports (created_at);
