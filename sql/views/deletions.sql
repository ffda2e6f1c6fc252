-- grain: one row per deletion report (expire, forget or asset replacement run, dry runs included)
-- What was deleted, when, why and how much; the text is gone, the report stays. Message-level detail:
-- the lineage view shows expired_at for every message key.

create or replace view deletions with (security_invoker = true) as
with reports as (
    select
        dr.report_id,
        coalesce(dr.namespace, '*') as namespace,
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
),

count_totals as (
    select
        r.report_id,
        case
            when jsonb_typeof(r.counts -> 'total') = 'object'
                then coalesce((r.counts #>> '{total,removed}')::bigint, 0)
            else coalesce(sum((c.value #>> '{}')::numeric), 0)::bigint
        end as count_rows_deleted
    from reports as r
    left join lateral jsonb_each(case jsonb_typeof(r.counts) when 'object' then r.counts else '{}'::jsonb end) as c
        on jsonb_typeof(c.value) = 'number'
    group by r.report_id, r.counts
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
    join count_totals as ct on ct.report_id = r.report_id
)

select * from final;

comment on view deletions is 'Deletions: one row per deletion report (expire, forget, asset_replace), dry runs included and flagged.';
comment on column deletions.report_id is 'Id of the deletion report (deletion_reports.report_id).';
comment on column deletions.namespace is 'Namespace the deletion covered; ''*'' when it spanned every namespace.';
comment on column deletions.subject_id is 'Subject forgotten (forget), else null.';
comment on column deletions.kind is 'expire (L1 past retention), forget (one subject erased), asset_replace (old asset chunks).';
comment on column deletions.dry_run is 'True when nothing was deleted (counts say what would have been).';
comment on column deletions.forced is 'True when expiry ran with --force past the rollup guard.';
comment on column deletions.reason is 'Reason given by the operator, if any.';
comment on column deletions.counts is 'Counts as the stage reported them: expire {total: {expired, removed, dropped, deleted, guarded}, by_namespace: {...}}; forget: rows per table.';
comment on column deletions.count_rows_deleted is 'Rows deleted (or, in a dry run, that would be): L1 messages removed for expire (counts.total.removed), the sum of the per-table counts for forget and asset_replace.';
comment on column deletions.partitions_dropped is 'L1 partitions dropped whole.';
comment on column deletions.count_partitions_dropped is 'Number of partitions dropped.';
comment on column deletions.oldest_event_at is 'Event time of the oldest deleted message.';
comment on column deletions.newest_event_at is 'Event time of the newest deleted message.';
comment on column deletions.archive_path is 'Parquet archive written before deletion (STRATAFLOW_ARCHIVE_EXPIRED), if any.';
comment on column deletions.run_id is 'pipeline_runs.run_id of the deleting run.';
comment on column deletions.deleted_at is 'When the deletion ran (processing time).';
