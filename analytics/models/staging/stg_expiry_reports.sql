-- One row per (expire deletion report, namespace it removed rows of): the report's by_namespace counts,
-- real runs only (dry runs deleted nothing).
select
    d.report_id,
    n.key as namespace,
    d.deleted_at,
    coalesce((n.value ->> 'removed')::bigint, 0) as rows_removed
from {{ source('strataflow', 'deletions') }} as d
cross join lateral jsonb_each(coalesce(d.counts -> 'by_namespace', '{}'::jsonb)) as n
where d.kind = 'expire' and not d.dry_run
