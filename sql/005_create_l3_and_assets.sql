-- L3 cold memory (weekly reports, insights) and the long-term layer built from data assets.

create table weekly_reports (
    report_id bigint generated always as identity primary key,
    namespace text not null,
    subject_id text not null,
    week_start date not null,                -- ISO week Monday in STRATAFLOW_TIMEZONE
    week_end date not null,
    summary text not null,                   -- Markdown
    key_events jsonb not null default '[]'::jsonb,   -- [{event, message_ids: [...]}]
    metrics jsonb not null default '{}'::jsonb,
    input_hash text not null,                -- hash of the week's inputs: unchanged inputs rewrite nothing
    source_message_ids bigint[] not null default '{}',
    embedding vector(384),
    embedding_model text,
    fts tsvector,
    run_id uuid,
    prompt_version text,
    model text,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    unique (namespace, subject_id, week_start)
);
create index weekly_reports_fts_idx on weekly_reports using gin (fts);
create index weekly_reports_embedding_idx on weekly_reports using hnsw (embedding vector_cosine_ops);

create table insights (
    insight_id bigint generated always as identity primary key,
    namespace text not null,
    subject_id text not null,
    key text not null,                       -- the attribute, e.g. occupation
    question text not null,                  -- e.g. What is the user's occupation?
    statement text not null,
    confidence real not null default 0.5 check (confidence between 0 and 1),
    evidence_item_ids bigint[] not null default '{}',
    evidence_message_ids bigint[] not null default '{}',
    valid_from timestamptz not null,
    valid_to timestamptz,                    -- null while current
    recorded_at timestamptz not null default now(),
    superseded_at timestamptz,
    embedding vector(384),
    embedding_model text,
    run_id uuid,
    prompt_version text,
    model text
);
create unique index insights_current_key_idx on insights (namespace, subject_id, key) where valid_to is null;
create index insights_scope_idx on insights (namespace, subject_id);

create table asset_documents (
    document_id bigint generated always as identity primary key,
    namespace text not null,
    uri text not null,
    kind text not null,                      -- markdown, text, csv, parquet, json, sql
    title text,
    checksum text not null,
    version integer not null default 1,
    metadata jsonb not null default '{}'::jsonb,
    run_id uuid,
    ingested_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    unique (namespace, uri)
);

create table asset_chunks (
    chunk_id bigint generated always as identity primary key,
    document_id bigint not null references asset_documents (document_id) on delete cascade,
    namespace text not null,
    chunk_index integer not null,
    content text not null,
    content_hash text not null,
    token_count integer not null,
    lang text,
    embedding vector(384),
    embedding_model text,
    fts tsvector,
    metadata jsonb not null default '{}'::jsonb,
    unique (document_id, chunk_index)
);
create index asset_chunks_namespace_idx on asset_chunks (namespace);
create index asset_chunks_fts_idx on asset_chunks using gin (fts);
create index asset_chunks_embedding_idx on asset_chunks using hnsw (embedding vector_cosine_ops);
