-- grain: one row per (deletion report, namespace whose rows it removed), dry runs included
-- What was deleted, when, why and how much; the text is gone, the report stays. An expiry over every
-- namespace has one row per namespace it removed rows of (deletion_report_namespaces), so each namespace's
-- analysts see their part; a report that names no namespace at all shows '*' (pipeline and owner only).
-- Message-level detail: the lineage view shows expired_at for every message key.

create or replace view deletions with (security_invoker = true) as
with reports as (
    select
        drn.report_id,
        drn.namespace,
        drn.subject_id,
        drn.kind,
        drn.dry_run,
        drn.forced,
        drn.reason,
        drn.counts,
        drn.partitions_dropped,
        drn.oldest_event_at,
        drn.newest_event_at,
        drn.archive_path,
        drn.run_id,
        drn.created_at
    from deletion_report_namespaces as drn
    union all
    select
        dr.report_id,
        '*' as namespace,
        dr.subject_id,
        dr.kind,
        dr.dry_run,
        dr.forced,
        dr.reason,
        dr.counts,
        dr.partitions_dropped,
        dr.oldest_event_at,
        dr.newest_event_at,
        dr.archive_path,
        dr.run_id,
        dr.created_at
    from deletion_reports as dr
    where not exists (
        select 1 from deletion_report_namespaces as drn
        where drn.report_id = dr.report_id
    )
),

count_totals as (
    select
        r.report_id,
        r.namespace,
        case
            when jsonb_typeof(r.counts -> 'removed') = 'number'
                then (r.counts ->> 'removed')::bigint
            when jsonb_typeof(r.counts -> 'total') = 'object'
                then coalesce((r.counts #>> '{total,removed}')::bigint, 0)
            else coalesce(sum((c.value #>> '{}')::numeric), 0)::bigint
        end as count_rows_deleted
    from reports as r
    left join lateral jsonb_each(case jsonb_typeof(r.counts) when 'object' then r.counts else '{}'::jsonb end) as c
        on jsonb_typeof(c.value) = 'number'
    group by r.report_id, r.namespace, r.counts
),

final as (
    select
        r.report_id,
        r.namespace,
        r.subject_id,
        r.kind,
        r.dry_run,
        r.forced,
        r.reason,
        r.counts,
        ct.count_rows_deleted,
        r.partitions_dropped,
        cardinality(r.partitions_dropped) as count_partitions_dropped,
        r.oldest_event_at,
        r.newest_event_at,
        r.archive_path,
        r.run_id,
        r.created_at as deleted_at
    from reports as r
    join count_totals as ct on ct.report_id = r.report_id and ct.namespace = r.namespace
)

select * from final;

comment on view deletions is 'Deletions: one row per (deletion report, namespace whose rows it removed): expire, forget, asset_replace; dry runs included and flagged.';
comment on column deletions.report_id is 'Id of the deletion report (deletion_reports.report_id); an expiry over several namespaces has one row per namespace.';
comment on column deletions.namespace is 'Namespace whose rows the report removed; ''*'' for a report that names none (visible to the pipeline only).';
comment on column deletions.subject_id is 'Subject forgotten (forget), else null.';
comment on column deletions.kind is 'expire (L1 past retention), forget (one subject erased), asset_replace (old asset chunks).';
comment on column deletions.dry_run is 'True when nothing was deleted (counts say what would have been).';
comment on column deletions.forced is 'True when expiry ran with --force past the rollup guard.';
comment on column deletions.reason is 'Reason given by the operator, if any.';
comment on column deletions.counts is 'Counts for this namespace: expire {expired, removed, dropped, deleted, guarded, forced}; forget: rows per table.';
comment on column deletions.count_rows_deleted is 'Rows of this namespace deleted (or, in a dry run, that would be): L1 messages removed for expire, the sum of the per-table counts for forget and asset_replace.';
comment on column deletions.partitions_dropped is 'L1 partitions dropped whole (a partition holds rows of every namespace).';
comment on column deletions.count_partitions_dropped is 'Number of partitions dropped.';
comment on column deletions.oldest_event_at is 'Event time of the oldest deleted message (over the whole report).';
comment on column deletions.newest_event_at is 'Event time of the newest deleted message (over the whole report).';
comment on column deletions.archive_path is 'Parquet archive written before deletion (STRATAFLOW_ARCHIVE_EXPIRED), if any.';
comment on column deletions.run_id is 'pipeline_runs.run_id of the deleting run.';
comment on column deletions.deleted_at is 'When the deletion ran (processing time).';
