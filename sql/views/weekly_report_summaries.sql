-- grain: one row per weekly report (namespace, subject_id, week_start)
-- L3 weekly reports with their size and lineage counts; week_start is the ISO Monday in STRATAFLOW_TIMEZONE.

create or replace view weekly_report_summaries with (security_invoker = true) as
with reports as (
    select
        wr.report_id,
        wr.namespace,
        wr.subject_id,
        wr.week_start,
        wr.week_end,
        wr.summary,
        wr.key_events,
        wr.metrics,
        wr.source_message_ids,
        wr.embedding is not null as has_embedding,
        wr.run_id,
        wr.prompt_version,
        wr.model,
        wr.created_at,
        wr.updated_at
    from weekly_reports as wr
),

final as (
    select
        r.report_id,
        r.namespace,
        r.subject_id,
        r.week_start,
        r.week_end,
        r.summary,
        jsonb_array_length(case jsonb_typeof(r.key_events) when 'array' then r.key_events else '[]'::jsonb end)
            as count_key_events,
        r.key_events,
        r.metrics,
        cardinality(r.source_message_ids) as count_source_messages,
        r.has_embedding,
        r.run_id,
        r.prompt_version,
        r.model,
        r.created_at,
        r.updated_at
    from reports as r
)

select * from final;

comment on view weekly_report_summaries is 'L3 weekly reports: one row per (namespace, subject_id, week_start).';
comment on column weekly_report_summaries.report_id is 'Id of the report (weekly_reports.report_id); use it in the lineage view.';
comment on column weekly_report_summaries.namespace is 'Project, agent or app the report belongs to.';
comment on column weekly_report_summaries.subject_id is 'The user (or scope) the report is about.';
comment on column weekly_report_summaries.week_start is 'ISO week Monday, in STRATAFLOW_TIMEZONE.';
comment on column weekly_report_summaries.week_end is 'Last day (Sunday) of the ISO week.';
comment on column weekly_report_summaries.summary is 'The week''s summary (Markdown).';
comment on column weekly_report_summaries.count_key_events is 'Number of key events listed for the week.';
comment on column weekly_report_summaries.key_events is 'Key events as JSON: [{event, message_ids}].';
comment on column weekly_report_summaries.metrics is 'Week metrics as JSON (message counts, intents, ...), as written by the rollup.';
comment on column weekly_report_summaries.count_source_messages is 'Number of L1 messages the report was built from.';
comment on column weekly_report_summaries.has_embedding is 'True once the report is embedded (needed for vector search).';
comment on column weekly_report_summaries.run_id is 'pipeline_runs.run_id of the rollup run that wrote the report.';
comment on column weekly_report_summaries.prompt_version is 'Rollup prompt version.';
comment on column weekly_report_summaries.model is 'Model that wrote the summary.';
comment on column weekly_report_summaries.created_at is 'When the report was first written.';
comment on column weekly_report_summaries.updated_at is 'When the report last changed (a late backfill rewrites its week).';
