-- One row per (expire deletion report, namespace it removed rows of): the deletions view names each
-- namespace of an expiry over every namespace in a row of its own; real runs only (dry runs deleted nothing).
select
    d.report_id,
    d.namespace,
    d.deleted_at,
    d.count_rows_deleted as rows_removed
from {{ source('strataflow', 'deletions') }} as d
where d.kind = 'expire' and not d.dry_run and d.namespace <> '*'
