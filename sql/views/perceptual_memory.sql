-- grain: one row per L1 message, L2 item or data asset of today, per (namespace, subject_id)
-- Seed 004 perceptual memory: what a scope said, learned and was given today. Messages: event time today.
-- Items: active items made true today (valid_from) or written today (updated_at), so a fact extracted
-- tonight from today's talk shows. Assets: data assets ingested (or re-ingested) today; they belong to a
-- namespace, not to a subject, so their subject_id is null and a reader of one subject's perceptual memory
-- adds `or subject_id is null` to see them. "Today" is the session's current_date: strataflow sets the
-- session TimeZone to STRATAFLOW_TIMEZONE, so the day starts at local midnight of the configured zone.

create or replace view perceptual_memory with (security_invoker = true) as
with today as (
    select
        current_date::timestamptz as day_start,
        (current_date + 1)::timestamptz as day_end
),

todays_messages as (
    select
        'message'::text as memory_type,
        m.namespace,
        m.subject_id,
        m.message_id as memory_id,
        m.role,
        m.intent,
        null::text as kind,
        null::text as key,
        m.content as text,
        m.event_at,
        m.ingested_at as recorded_at,
        array[m.message_id] as source_message_ids
    from conversation_messages as m
    cross join today as t
    where m.event_at >= t.day_start and m.event_at < t.day_end
),

todays_items as (
    select
        'item'::text as memory_type,
        i.namespace,
        i.subject_id,
        i.item_id as memory_id,
        null::text as role,
        null::text as intent,
        i.kind,
        i.key,
        coalesce(i.statement, i.value::text) as text,
        i.valid_from as event_at,
        i.updated_at as recorded_at,
        i.source_message_ids
    from memory_items as i
    cross join today as t
    where i.status = 'active'
        and ((i.valid_from >= t.day_start and i.valid_from < t.day_end)
            or (i.updated_at >= t.day_start and i.updated_at < t.day_end))
),

todays_assets as (
    select
        'asset'::text as memory_type,
        d.namespace,
        null::text as subject_id,
        d.document_id as memory_id,
        null::text as role,
        null::text as intent,
        d.kind,
        d.uri as key,
        coalesce(d.title, d.uri) as text,
        d.updated_at as event_at,
        d.updated_at as recorded_at,
        '{}'::bigint[] as source_message_ids
    from asset_documents as d
    cross join today as t
    where (d.ingested_at >= t.day_start and d.ingested_at < t.day_end)
        or (d.updated_at >= t.day_start and d.updated_at < t.day_end)
),

perceptual as (
    select * from todays_messages
    union all
    select * from todays_items
    union all
    select * from todays_assets
)

select * from perceptual;

comment on view perceptual_memory is
    'Seed 004 perceptual memory: today''s L1 messages, L2 items and ingested data assets, today in the session time zone (STRATAFLOW_TIMEZONE).';
comment on column perceptual_memory.memory_type is 'message (an L1 row), item (an L2 memory item) or asset (a data asset ingested today)';
comment on column perceptual_memory.namespace is 'scope: project, agent or app';
comment on column perceptual_memory.subject_id is 'scope: the user the memory is about (null for assets: they belong to the namespace)';
comment on column perceptual_memory.memory_id is 'message_id for messages, item_id for items, document_id for assets';
comment on column perceptual_memory.role is 'message role (messages only)';
comment on column perceptual_memory.intent is 'message intent (messages only)';
comment on column perceptual_memory.kind is 'memory kind (items) or asset kind (assets: markdown, csv, ...)';
comment on column perceptual_memory.key is 'memory key (items) or the asset uri (assets)';
comment on column perceptual_memory.text is 'message content, item statement, or asset title';
comment on column perceptual_memory.event_at is 'event time: when it was said, when the item became true, or when the asset was ingested';
comment on column perceptual_memory.recorded_at is 'processing time: when the pipeline wrote it';
comment on column perceptual_memory.source_message_ids is 'lineage: the L1 messages behind the row';
