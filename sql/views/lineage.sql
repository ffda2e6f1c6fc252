-- grain: one row per (artifact, source message): an L2 item, an L3 weekly report or an insight, and one
-- L1 message it was built from
-- Lineage survives L1 expiry: message_keys keeps ids, hash and times after the text is dropped, so an
-- expired source shows is_expired = true, its expired_at, and a null content.

create or replace view lineage with (security_invoker = true) as
with item_sources as (
    select
        'memory_item'::text as artifact_type,
        mi.item_id as artifact_id,
        mi.namespace,
        mi.subject_id,
        mi.kind || ':' || mi.key as artifact_label,
        mi.status = 'active' as is_artifact_current,
        mi.run_id,
        mi.model,
        mi.prompt_version,
        src.message_id
    from memory_items as mi
    cross join lateral unnest(mi.source_message_ids) as src (message_id)
),

report_sources as (
    select
        'weekly_report'::text as artifact_type,
        wr.report_id as artifact_id,
        wr.namespace,
        wr.subject_id,
        'week ' || wr.week_start::text as artifact_label,
        true as is_artifact_current,
        wr.run_id,
        wr.model,
        wr.prompt_version,
        src.message_id
    from weekly_reports as wr
    cross join lateral unnest(wr.source_message_ids) as src (message_id)
),

insight_sources as (
    select
        'insight'::text as artifact_type,
        ins.insight_id as artifact_id,
        ins.namespace,
        ins.subject_id,
        ins.key as artifact_label,
        ins.valid_to is null as is_artifact_current,
        ins.run_id,
        ins.model,
        ins.prompt_version,
        src.message_id
    from insights as ins
    cross join lateral unnest(ins.evidence_message_ids) as src (message_id)
),

artifact_sources as (
    select * from item_sources
    union all
    select * from report_sources
    union all
    select * from insight_sources
),

final as (
    select
        a.artifact_type,
        a.artifact_id,
        a.namespace,
        a.subject_id,
        a.artifact_label,
        a.is_artifact_current,
        a.run_id,
        a.model,
        a.prompt_version,
        a.message_id,
        mk.source,
        mk.source_message_id,
        mk.conversation_id,
        mk.event_at,
        mk.content_hash,
        mk.expired_at,
        mk.expired_at is not null or cm.message_id is null as is_expired,
        cm.role,
        cm.content
    from artifact_sources as a
    left join message_keys as mk on mk.message_id = a.message_id
    left join conversation_messages as cm on cm.message_id = mk.message_id and cm.event_at = mk.event_at
)

select * from final;

comment on view lineage is 'Lineage: one row per (artifact, source message) for L2 items, L3 weekly reports and insights; expired sources keep ids, hash and times.';
comment on column lineage.artifact_type is 'memory_item, weekly_report or insight.';
comment on column lineage.artifact_id is 'memory_items.item_id, weekly_reports.report_id or insights.insight_id, by artifact_type.';
comment on column lineage.namespace is 'Namespace of the artifact.';
comment on column lineage.subject_id is 'Subject of the artifact.';
comment on column lineage.artifact_label is 'Readable name: kind:key for items, week <monday> for reports, the key for insights.';
comment on column lineage.is_artifact_current is 'False for deleted items and superseded insights.';
comment on column lineage.run_id is 'pipeline_runs.run_id of the run that wrote the artifact.';
comment on column lineage.model is 'Model that produced the artifact (null for manual items).';
comment on column lineage.prompt_version is 'Prompt version that produced the artifact.';
comment on column lineage.message_id is 'L1 message id (message_keys.message_id) the artifact came from.';
comment on column lineage.source is 'Source of the message (input file base name, locomo:<id>, --source).';
comment on column lineage.source_message_id is 'The message id in its source.';
comment on column lineage.conversation_id is 'Conversation of the message.';
comment on column lineage.event_at is 'When the message was said (event time).';
comment on column lineage.content_hash is 'sha256 of the message content (stays after expiry).';
comment on column lineage.expired_at is 'When expiry removed the message text; null while it is in L1.';
comment on column lineage.is_expired is 'True when the message text is gone (expired or forgotten).';
comment on column lineage.role is 'user, assistant, system or tool (null once expired).';
comment on column lineage.content is 'The message text while it is in L1 (null once expired).';
