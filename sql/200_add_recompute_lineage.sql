-- Recomputing with another model or prompt version (backfill reprocess): which model and run last
-- confirmed an L2 item whose value did not change, and every earlier revision of a weekly report.
-- A changed L2 value already gets a new version in memory_item_versions (with its model and run id).

alter table memory_items
    add column confirmed_model text,
    add column confirmed_prompt_version text,
    add column confirmed_run_id uuid,
    add column confirmed_at timestamptz;

comment on column memory_items.confirmed_model is
    'The model that last re-extracted this item and found the same value (a reprocess); null: only the model that wrote it.';
comment on column memory_items.confirmed_prompt_version is
    'The prompt version of that confirming extraction.';
comment on column memory_items.confirmed_run_id is 'The pipeline run of that confirming extraction.';
comment on column memory_items.confirmed_at is 'When the value was last confirmed by a re-extraction.';

alter table weekly_reports add column revision integer not null default 1;
-- A revision belongs to its report in the report's namespace (as L2 history does, sql/100).
alter table weekly_reports add constraint weekly_reports_report_namespace_key unique (report_id, namespace);

comment on column weekly_reports.revision is
    'Revision of the report: 1 when first written, + 1 each time it is rewritten; earlier ones are in weekly_report_revisions.';

-- grain: one row per earlier revision of a weekly report (the current one stays in weekly_reports)
create table weekly_report_revisions (
    revision_id bigint generated always as identity primary key,
    report_id bigint not null,
    namespace text not null,
    subject_id text not null,
    week_start date not null,
    revision integer not null,
    summary text not null,
    key_events jsonb not null,
    metrics jsonb not null,
    input_hash text not null,
    source_message_ids bigint[] not null default '{}',
    run_id uuid,
    prompt_version text,
    model text,
    written_at timestamptz not null,
    superseded_at timestamptz not null default now(),
    unique (report_id, revision),
    foreign key (report_id, namespace) references weekly_reports (report_id, namespace) on delete cascade
);
create index weekly_report_revisions_scope_idx on weekly_report_revisions (namespace, subject_id, week_start);

comment on table weekly_report_revisions is
    'Earlier revisions of weekly reports, copied when a report is rewritten (late data or a reprocess).';
comment on column weekly_report_revisions.report_id is 'The weekly_reports row this was a revision of.';
comment on column weekly_report_revisions.namespace is 'Namespace of the report.';
comment on column weekly_report_revisions.subject_id is 'Subject of the report.';
comment on column weekly_report_revisions.week_start is 'Monday of the ISO week (STRATAFLOW_TIMEZONE).';
comment on column weekly_report_revisions.revision is 'The revision number it had while current.';
comment on column weekly_report_revisions.summary is 'Its Markdown summary.';
comment on column weekly_report_revisions.key_events is 'Its key events [{event, message_ids}].';
comment on column weekly_report_revisions.metrics is 'Its metrics.';
comment on column weekly_report_revisions.input_hash is 'Hash of the week''s inputs it was written from.';
comment on column weekly_report_revisions.source_message_ids is 'The L1 messages of its week.';
comment on column weekly_report_revisions.run_id is 'The pipeline run that wrote it.';
comment on column weekly_report_revisions.prompt_version is 'The rollup prompt version that wrote it.';
comment on column weekly_report_revisions.model is 'The model that wrote it.';
comment on column weekly_report_revisions.written_at is 'When it was written.';
comment on column weekly_report_revisions.superseded_at is 'When a newer revision replaced it.';
