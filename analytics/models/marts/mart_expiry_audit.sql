-- grain: one row per (namespace, ISO week of the expiry) in which expiry removed L1 rows or reported doing so.
-- rows_expired counts the message keys marked expired that week; rows_reported and deletions_reported
-- what the expire deletion reports of that week say. The two agree when is_reconciled.
with expired as (
    select
        namespace,
        date_trunc('week', expired_at)::date as week_start,
        count(*) as rows_expired
    from {{ ref('stg_expired_messages') }}
    group by 1, 2
),

reported as (
    select
        namespace,
        date_trunc('week', deleted_at)::date as week_start,
        count(distinct report_id) as deletions_reported,
        sum(rows_removed) as rows_reported
    from {{ ref('stg_expiry_reports') }}
    group by 1, 2
)

select
    coalesce(e.namespace, r.namespace) as namespace,
    coalesce(e.week_start, r.week_start) as week_start,
    to_char(coalesce(e.week_start, r.week_start), 'IYYY-"W"IW') as iso_week,
    coalesce(e.rows_expired, 0) as rows_expired,
    coalesce(r.deletions_reported, 0) as deletions_reported,
    coalesce(r.rows_reported, 0) as rows_reported,
    coalesce(e.rows_expired, 0) = coalesce(r.rows_reported, 0) as is_reconciled
from expired as e
full join reported as r on r.namespace = e.namespace and r.week_start = e.week_start
