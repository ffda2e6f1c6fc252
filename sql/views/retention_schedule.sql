-- grain: one row per (namespace, L1 partition) holding messages
-- What expires when: L1 rows expire at event time + retention days (expires_at); expiry drops a weekly
-- partition once every row in it is past expires_at and its weeks are rolled up into L3. Weeks are ISO
-- weeks in the session time zone (STRATAFLOW_TIMEZONE). Reads every L1 row: meant for analysts, not loops.

create or replace view retention_schedule with (security_invoker = true) as
with l1_rows as (
    select
        cm.tableoid::regclass::text as partition_name,
        cm.namespace,
        cm.subject_id,
        cm.event_at,
        cm.expires_at,
        date_trunc('week', cm.event_at)::date as week_start
    from conversation_messages as cm
),

rolled_up_weeks as (
    select wr.namespace, wr.subject_id, wr.week_start
    from weekly_reports as wr
),

per_partition as (
    select
        l.namespace,
        l.partition_name,
        count(*) as count_messages,
        count(distinct l.subject_id) as count_subjects,
        min(l.event_at) as oldest_event_at,
        max(l.event_at) as newest_event_at,
        min(l.expires_at) as first_expires_at,
        max(l.expires_at) as last_expires_at,
        count(*) filter (where l.expires_at <= now()) as count_past_expiry,
        count(*) filter (where rw.week_start is null) as count_not_rolled_up
    from l1_rows as l
    left join rolled_up_weeks as rw
        on rw.namespace = l.namespace and rw.subject_id = l.subject_id and rw.week_start = l.week_start
    group by l.namespace, l.partition_name
),

final as (
    select
        pp.namespace,
        pp.partition_name,
        pp.count_messages,
        pp.count_subjects,
        pp.oldest_event_at,
        pp.newest_event_at,
        pp.first_expires_at,
        pp.last_expires_at,
        pp.count_past_expiry,
        pp.count_not_rolled_up,
        pp.last_expires_at <= now() as is_past_expiry,
        pp.last_expires_at <= now() and pp.count_not_rolled_up = 0 as is_due
    from per_partition as pp
)

select * from final;

comment on view retention_schedule is 'L1 retention: one row per (namespace, weekly partition) with when its rows expire and whether expiry may drop them.';
comment on column retention_schedule.namespace is 'Namespace of the messages.';
comment on column retention_schedule.partition_name is 'L1 partition (conversation_messages_wIYYY_IW, one per ISO week in UTC).';
comment on column retention_schedule.count_messages is 'Messages of this namespace in the partition.';
comment on column retention_schedule.count_subjects is 'Distinct subjects with messages in the partition.';
comment on column retention_schedule.oldest_event_at is 'Earliest event time in the partition for this namespace.';
comment on column retention_schedule.newest_event_at is 'Latest event time in the partition for this namespace.';
comment on column retention_schedule.first_expires_at is 'When the first row passes retention (event time + retention days).';
comment on column retention_schedule.last_expires_at is 'When the last row passes retention: the earliest time expiry can drop the partition.';
comment on column retention_schedule.count_past_expiry is 'Rows already past expires_at (still here until the guarded expire step runs).';
comment on column retention_schedule.count_not_rolled_up is 'Rows whose ISO week has no weekly report yet; expiry keeps the partition until they are rolled up.';
comment on column retention_schedule.is_past_expiry is 'True when every row of this namespace in the partition is past expires_at.';
comment on column retention_schedule.is_due is 'True when past expiry and fully rolled up: the next expire run drops it (other namespaces in the same partition permitting).';
