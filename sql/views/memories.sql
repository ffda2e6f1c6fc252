-- grain: one row per current, active L2 memory item (namespace, subject_id, kind, key)
-- The current state of L2: what an agent would be told today. Deleted items and the internal
-- hot_summary kind are left out (see memory_as_of() for history, lineage for sources).

create or replace view memories with (security_invoker = true) as
with active_items as (
    select
        mi.item_id,
        mi.namespace,
        mi.subject_id,
        mi.agent_id,
        mi.kind,
        mi.key,
        mi.value,
        mi.statement,
        mi.category,
        mi.importance,
        mi.confidence,
        mi.source,
        mi.version,
        mi.valid_from,
        mi.recorded_at,
        mi.updated_at,
        mi.source_message_ids,
        mi.embedding is not null as has_embedding,
        mi.run_id,
        mi.prompt_version,
        mi.model
    from memory_items as mi
    where mi.status = 'active'
      and mi.kind <> 'hot_summary'
),

final as (
    select
        ai.item_id,
        ai.namespace,
        ai.subject_id,
        ai.agent_id,
        ai.kind,
        ai.key,
        ai.value,
        ai.statement,
        ai.category,
        ai.importance,
        ai.confidence,
        ai.source = 'manual' as is_manual,
        ai.version,
        ai.valid_from,
        ai.recorded_at,
        ai.updated_at,
        cardinality(ai.source_message_ids) as count_source_messages,
        ai.has_embedding,
        ai.run_id,
        ai.prompt_version,
        ai.model
    from active_items as ai
)

select * from final;

comment on view memories is 'Current L2 memory: one row per active item (namespace, subject_id, kind, key); deleted items and hot summaries excluded.';
comment on column memories.item_id is 'Stable id of the L2 item (memory_items.item_id); the key of memory_item_versions and lineage.';
comment on column memories.namespace is 'Project, agent or app the memory belongs to.';
comment on column memories.subject_id is 'The user the memory is about.';
comment on column memories.agent_id is 'Agent that owns the item (seed 003 agent scope), null when shared by every agent.';
comment on column memories.kind is 'Memory kind: fact, preference, intent, meta, status, decision, feedback, reference, observation.';
comment on column memories.key is 'snake_case attribute name, unique per (namespace, subject_id, kind); profile keys come from a closed vocabulary.';
comment on column memories.value is 'The value as JSON (numbers stay numbers; ranges such as "30+" stay strings).';
comment on column memories.statement is 'The statement in the user''s own words.';
comment on column memories.category is 'Seed 000 category (e.g. basic, career, immigration, family), when known.';
comment on column memories.importance is 'Importance 0-100 (fact 70, preference 60, intent 80 by default); context ranks by it.';
comment on column memories.confidence is 'Confidence 0-1 of the extraction (1 for manual edits).';
comment on column memories.is_manual is 'True when a person or agent wrote the current version (source manual); extraction never silently overwrites it.';
comment on column memories.version is 'Version number; every change adds a row to memory_item_versions.';
comment on column memories.valid_from is 'Event time of the statement that made the current value true (valid time).';
comment on column memories.recorded_at is 'When the pipeline first recorded the item (processing time).';
comment on column memories.updated_at is 'When the item row last changed.';
comment on column memories.count_source_messages is 'Number of L1 messages the item was extracted from (see the lineage view).';
comment on column memories.has_embedding is 'True once the item is embedded (needed for vector search).';
comment on column memories.run_id is 'pipeline_runs.run_id of the run that wrote the current version.';
comment on column memories.prompt_version is 'Extraction prompt version of the current version (null for manual edits).';
comment on column memories.model is 'Model that extracted the current version (null for manual edits).';
