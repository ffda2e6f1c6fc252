-- grain: one row per (namespace, day, flow) with at least one run or one quarantined record
-- day is the run's start day (quarantine: the record's day) in the session time zone. Quarantined records
-- are attributed to the flow of their run; records without a known run show flow 'unknown'.
-- Runs come from pipeline_run_namespaces: a run over every namespace counts once in each namespace it
-- worked in (an analyst sees it under its own namespace, and nothing of the others). A run over every
-- namespace that left no trace in any namespace shows namespace '*' (visible to the pipeline and owner only).

create or replace view pipeline_health with (security_invoker = true) as
with runs as (
    select
        prn.namespace,
        prn.started_at::date as day,
        prn.flow,
        prn.status,
        prn.started_at,
        prn.finished_at,
        prn.error
    from pipeline_run_namespaces as prn
    union all
    select
        coalesce(pr.namespace, '*') as namespace,
        pr.started_at::date as day,
        pr.flow,
        pr.status,
        pr.started_at,
        pr.finished_at,
        pr.error
    from pipeline_runs as pr
    where not exists (
        select 1 from pipeline_run_namespaces as prn
        where prn.run_id = pr.run_id
    )
),

run_daily as (
    select
        r.namespace,
        r.day,
        r.flow,
        count(*) as count_runs,
        count(*) filter (where r.status = 'completed') as count_completed,
        count(*) filter (where r.status = 'failed') as count_failed,
        count(*) filter (where r.status = 'budget_stopped') as count_budget_stopped,
        count(*) filter (where r.status = 'running') as count_running,
        count(*) filter (where r.status = 'completed_with_errors') as count_completed_with_errors,
        count(*) filter (where r.status = 'crashed') as count_crashed,
        max(r.started_at) as last_started_at,
        round(avg(extract(epoch from r.finished_at - r.started_at))::numeric, 3) as avg_duration_s,
        (array_agg(r.error order by r.started_at desc) filter (where r.error is not null))[1] as last_error
    from runs as r
    group by r.namespace, r.day, r.flow
),

quarantined as (
    select
        coalesce(q.namespace, '*') as namespace,
        q.created_at::date as day,
        coalesce(pr.flow, 'unknown') as flow,
        q.reason
    from quarantine as q
    left join pipeline_runs as pr on pr.run_id = q.run_id
),

quarantine_reasons as (
    select qd.namespace, qd.day, qd.flow, qd.reason, count(*) as count_records
    from quarantined as qd
    group by qd.namespace, qd.day, qd.flow, qd.reason
),

quarantine_daily as (
    select
        qr.namespace,
        qr.day,
        qr.flow,
        sum(qr.count_records)::bigint as count_quarantined,
        jsonb_object_agg(qr.reason, qr.count_records) as quarantine_by_reason
    from quarantine_reasons as qr
    group by qr.namespace, qr.day, qr.flow
),

final as (
    select
        coalesce(rd.namespace, qd.namespace) as namespace,
        coalesce(rd.day, qd.day) as day,
        coalesce(rd.flow, qd.flow) as flow,
        coalesce(rd.count_runs, 0) as count_runs,
        coalesce(rd.count_completed, 0) as count_completed,
        coalesce(rd.count_failed, 0) as count_failed,
        coalesce(rd.count_budget_stopped, 0) as count_budget_stopped,
        coalesce(rd.count_running, 0) as count_running,
        rd.last_started_at,
        rd.avg_duration_s,
        rd.last_error,
        coalesce(qd.count_quarantined, 0) as count_quarantined,
        coalesce(qd.quarantine_by_reason, '{}'::jsonb) as quarantine_by_reason,
        coalesce(rd.count_completed_with_errors, 0) as count_completed_with_errors,
        coalesce(rd.count_crashed, 0) as count_crashed
    from run_daily as rd
    full join quarantine_daily as qd
        on qd.namespace = rd.namespace and qd.day = rd.day and qd.flow = rd.flow
)

select * from final;

comment on view pipeline_health is 'Pipeline health: one row per (namespace, day, flow): runs by final state and quarantined records by reason.';
comment on column pipeline_health.namespace is 'Namespace the runs worked in (a run over every namespace counts in each one it touched); ''*'' for such runs that touched none (or records that name no namespace).';
comment on column pipeline_health.day is 'Day the runs started (quarantine: the day the record was quarantined), session time zone.';
comment on column pipeline_health.flow is 'Flow or CLI stage (nightly, weekly, ingest, extract, ...); ''unknown'' for quarantine rows without a run.';
comment on column pipeline_health.count_runs is 'Runs started that day.';
comment on column pipeline_health.count_completed is 'Runs that completed with no failed unit (quarantined rows are not failures).';
comment on column pipeline_health.count_failed is 'Runs that failed.';
comment on column pipeline_health.count_budget_stopped is 'Runs that stopped cleanly at the LLM budget (the next run resumes).';
comment on column pipeline_health.count_running is 'Runs still running (a run whose process died is counted as crashed once the next run of its flow finds it).';
comment on column pipeline_health.last_started_at is 'Start time of the latest run that day.';
comment on column pipeline_health.avg_duration_s is 'Mean duration in seconds of the finished runs.';
comment on column pipeline_health.last_error is 'Error of the latest run that recorded one (a run over every namespace: the part naming this namespace''s scopes).';
comment on column pipeline_health.count_quarantined is 'Records sent to quarantine.';
comment on column pipeline_health.quarantine_by_reason is 'Quarantined records per reason as JSON, e.g. {"missing_field": 3, "bad_timestamp": 1}.';
comment on column pipeline_health.count_completed_with_errors is 'Runs that completed while some LLM units (scopes, scope-weeks) failed; their errors name the scopes by hash.';
comment on column pipeline_health.count_crashed is 'Runs whose process died before closing them (marked crashed by the next run of the flow).';
