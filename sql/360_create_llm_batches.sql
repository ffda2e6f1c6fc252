-- The provider batches a nightly (or `strataflow extract --batch`) submitted: one row per batch, with the
-- identity of each request in it, so that a run that crashed while it waited, or the next run, collects the
-- answers of a batch already paid for instead of sending the work again (strataflow/llm/batch.py).
-- A batch spans namespaces (one per night): it has no namespace column, like pipeline_runs; its requests'
-- answers land in llm_cache and llm_calls per namespace.

create table llm_batches (
    llm_batch_id bigint generated always as identity primary key,
    provider text not null,
    batch_id text not null,
    run_id uuid,
    stage text not null,
    model text not null,
    status text not null check (status in ('submitted', 'completed', 'failed', 'expired', 'cancelled', 'collected')),
    provider_status text,
    input_file_id text not null,
    output_file_id text,
    error_file_id text,
    request_count integer not null check (request_count > 0),
    answered integer not null default 0,
    invalid integer not null default 0,
    missing integer not null default 0,
    requests jsonb not null,
    submitted_at timestamptz not null default now(),
    finished_at timestamptz,
    collected_at timestamptz
);
create unique index llm_batches_provider_batch_idx on llm_batches (provider, batch_id);
create index llm_batches_open_idx on llm_batches (provider, stage, model) where status <> 'collected';

comment on table llm_batches is 'Provider batches of LLM requests (the nightly''s extraction through the batch API): one row per batch, collected into llm_cache and llm_calls.';
comment on column llm_batches.llm_batch_id is 'Surrogate key.';
comment on column llm_batches.provider is 'The API the batch went to: STRATAFLOW_LLM_API_BASE, or openai (batch ids are unique per provider only).';
comment on column llm_batches.batch_id is 'The provider''s batch id.';
comment on column llm_batches.run_id is 'pipeline_runs.run_id of the run that submitted it.';
comment on column llm_batches.stage is 'LLM stage of its requests (extract).';
comment on column llm_batches.model is 'litellm model string the requests were built for.';
comment on column llm_batches.status is 'submitted (waiting), completed, failed, expired or cancelled (the provider''s end), collected (its answers are in llm_cache and llm_calls).';
comment on column llm_batches.provider_status is 'The provider''s last reported status (validating, in_progress, finalizing, completed, ...).';
comment on column llm_batches.input_file_id is 'The uploaded JSONL of requests.';
comment on column llm_batches.output_file_id is 'The provider''s JSONL of answers, once it has one.';
comment on column llm_batches.error_file_id is 'The provider''s JSONL of failed requests, if any.';
comment on column llm_batches.request_count is 'Requests in the batch.';
comment on column llm_batches.answered is 'Requests whose answer validated and was cached.';
comment on column llm_batches.invalid is 'Requests whose answer did not validate against the stage''s schema (recorded invalid_output).';
comment on column llm_batches.missing is 'Requests with no answer (failed, expired or cancelled): their work is left for the next run.';
comment on column llm_batches.requests is 'custom_id -> the work''s identity (stage, prompt_version, model, input_hash, namespace, subject_id, event_at).';
comment on column llm_batches.submitted_at is 'When the batch was submitted.';
comment on column llm_batches.finished_at is 'When the provider reported its end.';
comment on column llm_batches.collected_at is 'When its answers were collected.';
