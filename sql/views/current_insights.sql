-- grain: one row per current insight (namespace, subject_id, key)
-- Reflected insights that are still current (valid_to is null); superseded ones stay in the insights table.

create or replace view current_insights with (security_invoker = true) as
with current_rows as (
    select
        i.insight_id,
        i.namespace,
        i.subject_id,
        i.key,
        i.question,
        i.statement,
        i.confidence,
        i.evidence_item_ids,
        i.evidence_message_ids,
        i.valid_from,
        i.recorded_at,
        i.run_id,
        i.prompt_version,
        i.model
    from insights as i
    where i.valid_to is null
),

final as (
    select
        cr.insight_id,
        cr.namespace,
        cr.subject_id,
        cr.key,
        cr.question,
        cr.statement,
        cr.confidence,
        cardinality(cr.evidence_item_ids) as count_evidence_items,
        cardinality(cr.evidence_message_ids) as count_evidence_messages,
        cr.evidence_item_ids,
        cr.valid_from,
        cr.recorded_at,
        cr.run_id,
        cr.prompt_version,
        cr.model
    from current_rows as cr
)

select * from final;

comment on view current_insights is 'Current reflected insights: one row per (namespace, subject_id, key).';
comment on column current_insights.insight_id is 'Id of the insight (insights.insight_id).';
comment on column current_insights.namespace is 'Project, agent or app the insight belongs to.';
comment on column current_insights.subject_id is 'The user the insight is about.';
comment on column current_insights.key is 'The attribute the insight answers, e.g. occupation.';
comment on column current_insights.question is 'The question the insight answers, e.g. What is the user''s occupation?';
comment on column current_insights.statement is 'The reflected answer.';
comment on column current_insights.confidence is 'Confidence 0-1 given by reflection.';
comment on column current_insights.count_evidence_items is 'Number of L2 items cited as evidence.';
comment on column current_insights.count_evidence_messages is 'Number of L1 messages cited as evidence.';
comment on column current_insights.evidence_item_ids is 'memory_items.item_id values cited as evidence (join memories or lineage).';
comment on column current_insights.valid_from is 'Since when the insight holds (event time).';
comment on column current_insights.recorded_at is 'When reflection recorded it (processing time).';
comment on column current_insights.run_id is 'pipeline_runs.run_id of the reflection run.';
comment on column current_insights.prompt_version is 'Reflection prompt version.';
comment on column current_insights.model is 'Model that reflected the insight.';
