-- grain: one row per (namespace, ISO week of event time, kind) with at least one change of an L2 item.
-- Weeks are ISO weeks of the event time (when it was said) in the session time zone (STRATAFLOW_TIMEZONE),
-- so a backfill of last March shows March's weeks.
select
    namespace,
    to_char(event_at, 'IYYY-"W"IW') as iso_week,
    date_trunc('week', event_at)::date as week_start,
    kind,
    count(*) filter (where action = 'new') as new_items,
    count(*) filter (where action in ('content_modified', 'modified')) as changed_items,
    count(*) filter (where action = 'deleted') as deleted_items
from {{ ref('stg_memory_versions') }}
group by 1, 2, 3, 4
