-- L2 warm memory: one current row per (namespace, subject_id, kind, key), every change in memory_item_versions.
-- kind is one lower-case enum (see README "Memory kinds"); hot_summary is the internal kind of the nightly
-- hot memory (seed 001).

create table memory_items (
    item_id bigint generated always as identity primary key,
    namespace text not null,
    subject_id text not null,
    agent_id text,
    kind text not null check (kind in (
        'fact', 'preference', 'intent', 'meta', 'status', 'decision', 'feedback', 'reference',
        'observation', 'hot_summary')),
    key text not null check (key ~ '^[a-z][a-z0-9_]*$'),
    value jsonb,
    statement text,
    category text,
    importance integer not null default 50 check (importance between 0 and 100),
    confidence real not null default 1.0 check (confidence between 0 and 1),
    status text not null default 'active' check (status in ('active', 'deleted')),
    source text not null default 'extracted' check (source in ('extracted', 'manual')),
    version integer not null default 1,
    valid_from timestamptz not null,         -- event time of the statement that made it true
    recorded_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    reflected_version integer,               -- the version insight reflection last saw (seed 004 obs_reflected)
    embedding vector(384),
    embedding_model text,
    fts tsvector,
    source_message_ids bigint[] not null default '{}',
    metadata jsonb not null default '{}'::jsonb,
    run_id uuid,
    prompt_version text,
    model text,
    unique (namespace, subject_id, kind, key)
);
create index memory_items_scope_idx on memory_items (namespace, subject_id, kind);
create index memory_items_fts_idx on memory_items using gin (fts);
create index memory_items_embedding_idx on memory_items using hnsw (embedding vector_cosine_ops);
create index memory_items_unreflected_idx on memory_items (namespace, subject_id)
    where reflected_version is distinct from version;

-- Bi-temporal history: valid_from/valid_to (true in the world), recorded_at/superseded_at (known to us).
create table memory_item_versions (
    version_id bigint generated always as identity primary key,
    item_id bigint not null,
    namespace text not null,
    subject_id text not null,
    kind text not null,
    key text not null,
    version integer not null,
    action text not null check (action in ('new', 'content_modified', 'modified', 'deleted')),
    value jsonb,
    statement text,
    category text,
    importance integer,
    confidence real,
    status text not null,
    source text not null,
    valid_from timestamptz not null,
    valid_to timestamptz,
    recorded_at timestamptz not null default now(),
    superseded_at timestamptz,
    source_message_ids bigint[] not null default '{}',
    run_id uuid,
    prompt_version text,
    model text,
    note text                                -- e.g. why an extracted value was kept out of a manual field
);
create index memory_item_versions_item_idx on memory_item_versions (item_id, version);
create index memory_item_versions_scope_idx on memory_item_versions (namespace, subject_id, kind, key);

-- Seed 002: per-owner user and work documents; each field is {value, source, confidence, last_updated_at}.
create table profile_documents (
    profile_id bigint generated always as identity primary key,
    namespace text not null,
    subject_id text not null,
    doc_type text not null check (doc_type in ('user', 'work')),
    document jsonb not null default '{}'::jsonb,
    status text not null default 'ACTIVE' check (status in ('ACTIVE', 'DISABLED')),
    version integer not null default 1,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),
    unique (namespace, subject_id, doc_type)
);
