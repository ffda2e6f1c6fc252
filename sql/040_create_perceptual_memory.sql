-- Seed 004 perceptual memory: what a scope said and learned today.
-- grain: one row per L1 message or L2 item of today, per (namespace, subject_id).
-- "Today" is the session's current_date: strataflow sets the session TimeZone to STRATAFLOW_TIMEZONE, so the
-- day starts at local midnight of the configured zone. Messages: event time today. Items: active items made
-- true today (valid_from) or written today (updated_at), so a fact extracted tonight from today's talk shows.

create view perceptual_memory as
with today as (
    select current_date::timestamptz as day_start, (current_date + 1)::timestamptz as day_end
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
perceptual as (
    select * from todays_messages
    union all
    select * from todays_items
)
select * from perceptual;

comment on view perceptual_memory is
    'Seed 004 perceptual memory: today''s L1 messages and L2 items per scope, today in the session time zone (STRATAFLOW_TIMEZONE).';
comment on column perceptual_memory.memory_type is 'message (an L1 row) or item (an L2 memory item)';
comment on column perceptual_memory.namespace is 'scope: project, agent or app';
comment on column perceptual_memory.subject_id is 'scope: the user the memory is about';
comment on column perceptual_memory.memory_id is 'message_id for messages, item_id for items';
comment on column perceptual_memory.role is 'message role (messages only)';
comment on column perceptual_memory.intent is 'message intent (messages only)';
comment on column perceptual_memory.kind is 'memory kind (items only)';
comment on column perceptual_memory.key is 'memory key (items only)';
comment on column perceptual_memory.text is 'message content or item statement';
comment on column perceptual_memory.event_at is 'event time: when it was said, or when the item became true';
comment on column perceptual_memory.recorded_at is 'processing time: when the pipeline wrote it';
comment on column perceptual_memory.source_message_ids is 'lineage: the L1 messages behind the row';
