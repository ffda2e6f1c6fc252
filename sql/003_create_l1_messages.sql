-- L1 hot memory: every conversation message, partitioned by event time (one partition per ISO week, UTC
-- Monday 00:00) so expiry drops whole partitions instead of deleting rows.
--
-- PostgreSQL needs the partition key inside every unique constraint of a partitioned table, so message
-- identity lives in message_keys, a small unpartitioned table: (namespace, source, source_message_id) is
-- unique there, and it hands out the message_id that conversation_messages uses. message_keys also keeps
-- the lineage anchor (ids, hash, times) after the L1 row has expired.

create sequence ingest_seq as bigint;

create table message_keys (
    message_id bigint generated always as identity primary key,
    namespace text not null,
    source text not null,
    source_message_id text not null,
    subject_id text not null,
    conversation_id text not null,
    event_at timestamptz not null,           -- where the row lives in conversation_messages today
    content_hash text not null,
    first_ingested_at timestamptz not null default now(),
    expired_at timestamptz,                  -- set when expiry removed the L1 row (the key stays for lineage)
    unique (namespace, source, source_message_id)
);
create index message_keys_scope_idx on message_keys (namespace, subject_id);

create table conversation_messages (
    message_id bigint not null,
    namespace text not null,
    subject_id text not null,
    agent_id text,
    conversation_id text not null,
    source text not null,
    source_message_id text not null,
    role text not null check (role in ('user', 'assistant', 'system', 'tool')),
    content text not null,
    content_hash text not null,
    lang text,
    intent text,
    event_at timestamptz not null,           -- when it was said (event time)
    ingested_at timestamptz not null default now(),   -- when we first wrote it (processing time)
    updated_at timestamptz not null default now(),
    expires_at timestamptz not null,
    ingest_seq bigint not null default nextval('ingest_seq'),  -- extraction and rollup progress follow this
    embedding vector(384),
    embedding_model text,
    fts tsvector,
    metadata jsonb not null default '{}'::jsonb,
    run_id uuid,
    primary key (message_id, event_at)
) partition by range (event_at);

create index conversation_messages_scope_time_idx on conversation_messages (namespace, subject_id, event_at);
create index conversation_messages_seq_idx on conversation_messages (namespace, subject_id, ingest_seq);
create index conversation_messages_conversation_idx on conversation_messages (namespace, conversation_id, event_at);
create index conversation_messages_expires_idx on conversation_messages (expires_at);
create index conversation_messages_fts_idx on conversation_messages using gin (fts);
create index conversation_messages_embedding_idx on conversation_messages
    using hnsw (embedding vector_cosine_ops);
create index conversation_messages_unembedded_idx on conversation_messages (ingest_seq) where embedding is null;

-- Create the weekly partitions that cover [from_at, to_at]. Safe to call concurrently and repeatedly.
create function ensure_message_partitions(from_at timestamptz, to_at timestamptz) returns integer
language plpgsql as $$
declare
    week_start timestamptz := date_trunc('week', from_at at time zone 'UTC') at time zone 'UTC';
    partition_name text;
    created integer := 0;
begin
    while week_start <= to_at loop
        partition_name := 'conversation_messages_w' || to_char(week_start at time zone 'UTC', 'IYYY"_"IW');
        if to_regclass(partition_name) is null then
            perform pg_advisory_xact_lock(hashtext(partition_name));
            if to_regclass(partition_name) is null then
                execute format(
                    'create table %I partition of conversation_messages for values from (%L) to (%L)',
                    partition_name, week_start, week_start + interval '7 days');
                created := created + 1;
            end if;
        end if;
        week_start := week_start + interval '7 days';
    end loop;
    return created;
end;
$$;

-- One encode per (model, content_hash): identical texts are embedded once, and a rerun encodes nothing.
create table embedding_cache (
    model text not null,
    content_hash text not null,
    embedding vector(384) not null,
    created_at timestamptz not null default now(),
    primary key (model, content_hash)
);
