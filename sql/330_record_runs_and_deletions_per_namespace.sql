-- Runs and deletions that span every namespace are recorded per namespace, so each namespace's analysts see
-- their part of them (row-level security hides a row with no namespace from every analyst).
--
-- pipeline_run_namespaces: one row per (run, namespace it worked in). A run limited to one namespace has
-- one row from the start (a trigger on pipeline_runs); a run over every namespace gets one row per namespace
-- where it left a trace, written when it closes (strataflow_attribute_run, called by the run recorder), with
-- that namespace's counts only: what its result counted per namespace, its LLM requests, the scopes it
-- moved a watermark of, the records it quarantined and the rows it deleted. The run's state and end follow
-- the parent row (a trigger), so a run marked crashed later is crashed in every namespace's row; a global
-- run's error keeps only the parts that name that namespace's scopes (else the error's leading words).
--
-- deletion_report_namespaces: one row per (deletion report, namespace whose rows it removed): an expiry
-- over every namespace has one per namespace of its counts.by_namespace, a report of one namespace one row.
--
-- Both tables have a namespace column: strataflow_apply_namespace_security() (rerun after every upgrade)
-- puts the namespace policy on them and grants analysts SELECT on these parent tables (no partitions).

create table pipeline_run_namespaces (
    run_id uuid not null references pipeline_runs (run_id) on delete cascade,
    namespace text not null,
    flow text not null,
    status text not null check (
        status in ('running', 'completed', 'completed_with_errors', 'failed', 'budget_stopped', 'crashed')
    ),
    started_at timestamptz not null,
    finished_at timestamptz,
    counts jsonb not null default '{}'::jsonb,
    error text,
    primary key (run_id, namespace)
);
create index pipeline_run_namespaces_namespace_started_idx on pipeline_run_namespaces (namespace, started_at);

comment on table pipeline_run_namespaces is 'One row per (pipeline run, namespace it worked in): a run over every namespace has one per namespace it touched, with that namespace''s counts.';
comment on column pipeline_run_namespaces.run_id is 'pipeline_runs.run_id of the run.';
comment on column pipeline_run_namespaces.namespace is 'Namespace the run worked in.';
comment on column pipeline_run_namespaces.flow is 'Flow or CLI stage of the run.';
comment on column pipeline_run_namespaces.status is 'State of the run (the same as pipeline_runs.status).';
comment on column pipeline_run_namespaces.started_at is 'When the run started.';
comment on column pipeline_run_namespaces.finished_at is 'When the run ended.';
comment on column pipeline_run_namespaces.counts is 'What the run did in this namespace: llm_calls, tokens, cost_usd, scopes, quarantined, rows_deleted, embedded rows per table, ... (a run of one namespace: its counts).';
comment on column pipeline_run_namespaces.error is 'The run''s error as far as it concerns this namespace (a global run: the parts naming its scopes).';

create table deletion_report_namespaces (
    report_id bigint not null references deletion_reports (report_id) on delete cascade,
    namespace text not null,
    kind text not null,
    subject_id text,
    dry_run boolean not null,
    forced boolean not null,
    reason text,
    counts jsonb not null default '{}'::jsonb,
    partitions_dropped text[] not null default '{}',
    oldest_event_at timestamptz,
    newest_event_at timestamptz,
    archive_path text,
    run_id uuid,
    created_at timestamptz not null,
    primary key (report_id, namespace)
);
create index deletion_report_namespaces_created_idx on deletion_report_namespaces (created_at);

comment on table deletion_report_namespaces is 'One row per (deletion report, namespace whose rows it removed): an expiry over every namespace has one per namespace.';
comment on column deletion_report_namespaces.report_id is 'deletion_reports.report_id.';
comment on column deletion_report_namespaces.namespace is 'Namespace whose rows the report removed.';
comment on column deletion_report_namespaces.kind is 'expire, forget or asset_replace.';
comment on column deletion_report_namespaces.subject_id is 'Subject forgotten (forget), else null.';
comment on column deletion_report_namespaces.dry_run is 'True when nothing was deleted.';
comment on column deletion_report_namespaces.forced is 'True when expiry ran with --force past the rollup guard.';
comment on column deletion_report_namespaces.reason is 'Reason given by the operator, if any.';
comment on column deletion_report_namespaces.partitions_dropped is 'L1 partitions the report dropped whole (they held rows of every namespace).';
comment on column deletion_report_namespaces.oldest_event_at is 'Event time of the oldest message the report deleted (over all its namespaces).';
comment on column deletion_report_namespaces.newest_event_at is 'Event time of the newest message the report deleted (over all its namespaces).';
comment on column deletion_report_namespaces.archive_path is 'Parquet archive written before deletion, if any.';
comment on column deletion_report_namespaces.counts is 'The report''s counts for this namespace (expire: expired, removed, dropped, deleted, guarded, forced).';
comment on column deletion_report_namespaces.run_id is 'pipeline_runs.run_id of the deleting run.';
comment on column deletion_report_namespaces.created_at is 'When the deletion ran.';

create index quarantine_run_idx on quarantine (run_id);
create index watermarks_run_idx on watermarks (run_id);

-- The part of a run's error that concerns one namespace: the '; '-separated parts naming one of its scopes
-- ('<namespace>/sha256:<hash>'), else the words before the first colon (an error class, a stage name).
create function strataflow_namespace_error(error text, namespace text) returns text
language sql immutable as $$
    select case when error is null then null else coalesce(
        (select string_agg(part, '; ')
         from regexp_split_to_table(error, '; ') as part
         where part ~ ('(^|[ :;])' || regexp_replace(namespace, '([.-])', '\\\1', 'g')
                       || '/sha256:')),
        split_part(error, ':', 1)) end
$$;

create function strataflow_sync_run_namespaces() returns trigger
language plpgsql as $$
begin
    if tg_op = 'INSERT' then
        if new.namespace is not null then
            insert into pipeline_run_namespaces
                (run_id, namespace, flow, status, started_at, finished_at, counts, error)
            values
                (new.run_id, new.namespace, new.flow, new.status, new.started_at, new.finished_at, new.counts,
                 new.error)
            on conflict (run_id, namespace) do nothing;
        end if;
    else
        update pipeline_run_namespaces as p
        set
            flow = new.flow,
            status = new.status,
            started_at = new.started_at,
            finished_at = new.finished_at,
            counts = case when new.namespace is not null then new.counts else p.counts end,
            error = case
                when new.namespace is not null then new.error
                else strataflow_namespace_error(new.error, p.namespace)
            end
        where p.run_id = new.run_id;
    end if;
    return null;
end;
$$;

create trigger pipeline_runs_per_namespace
after insert or update of flow, status, started_at, finished_at, counts, error on pipeline_runs
for each row execute function strataflow_sync_run_namespaces();

-- Attribute a run over every namespace to the namespaces it worked in (p_given: {namespace: {count: n}} from
-- its result); a run of one namespace already has its row. Returns the rows written.
create function strataflow_attribute_run(p_run_id uuid, p_given jsonb default '{}'::jsonb) returns integer
language plpgsql as $$
declare
    run pipeline_runs%rowtype;
    written integer;
begin
    select * into run from pipeline_runs where run_id = p_run_id;
    if not found or run.namespace is not null then
        return 0;
    end if;
    with given as (
        select g.key as namespace, g.value as counts
        from jsonb_each(case jsonb_typeof(p_given) when 'object' then p_given else '{}'::jsonb end) as g
        where jsonb_typeof(g.value) = 'object'
    ),

    calls as (
        select
            lc.namespace,
            jsonb_build_object(
                'llm_calls', count(*),
                'llm_failed_calls', count(*) filter (where lc.outcome <> 'ok'),
                'tokens', coalesce(sum(lc.prompt_tokens + lc.completion_tokens), 0),
                'cost_usd', coalesce(sum(lc.cost_usd), 0)
            ) as counts
        from llm_calls as lc
        where lc.run_id = p_run_id and lc.namespace is not null
        group by lc.namespace
    ),

    scopes as (
        select w.namespace, jsonb_build_object('scopes', count(*)) as counts
        from watermarks as w
        where w.run_id = p_run_id
        group by w.namespace
    ),

    quarantined as (
        select q.namespace, jsonb_build_object('quarantined', count(*)) as counts
        from quarantine as q
        where q.run_id = p_run_id and q.namespace is not null
        group by q.namespace
    ),

    deleted as (
        select
            drn.namespace,
            jsonb_build_object('rows_deleted', sum(coalesce((drn.counts ->> 'removed')::bigint, 0))) as counts
        from deletion_report_namespaces as drn
        where drn.run_id = p_run_id and not drn.dry_run
        group by drn.namespace
    ),

    traces as (
        select namespace, counts from given
        union all select namespace, counts from calls
        union all select namespace, counts from scopes
        union all select namespace, counts from quarantined
        union all select namespace, counts from deleted
    ),

    per_namespace as (
        select t.namespace, jsonb_object_agg(kv.key, kv.value) as counts
        from traces as t
        cross join lateral jsonb_each(t.counts) as kv
        group by t.namespace
    )

    insert into pipeline_run_namespaces (run_id, namespace, flow, status, started_at, finished_at, counts, error)
    select
        run.run_id, pn.namespace, run.flow, run.status, run.started_at, run.finished_at, pn.counts,
        strataflow_namespace_error(run.error, pn.namespace)
    from per_namespace as pn
    on conflict (run_id, namespace) do update
    set
        counts = pipeline_run_namespaces.counts || excluded.counts,
        status = excluded.status,
        finished_at = excluded.finished_at,
        error = excluded.error;
    get diagnostics written = row_count;
    return written;
end;
$$;

create function strataflow_sync_deletion_namespaces() returns trigger
language plpgsql as $$
begin
    insert into deletion_report_namespaces
        (report_id, namespace, kind, subject_id, dry_run, forced, reason, counts, partitions_dropped,
         oldest_event_at, newest_event_at, archive_path, run_id, created_at)
    select
        new.report_id, n.key, new.kind, new.subject_id, new.dry_run, new.forced, new.reason, n.value,
        new.partitions_dropped, new.oldest_event_at, new.newest_event_at, new.archive_path, new.run_id,
        new.created_at
    from jsonb_each(
        case when jsonb_typeof(new.counts -> 'by_namespace') = 'object' then new.counts -> 'by_namespace'
        else '{}'::jsonb end
    ) as n
    where new.namespace is null or n.key = new.namespace
    on conflict (report_id, namespace) do nothing;
    if new.namespace is not null then
        insert into deletion_report_namespaces
            (report_id, namespace, kind, subject_id, dry_run, forced, reason, counts, partitions_dropped,
             oldest_event_at, newest_event_at, archive_path, run_id, created_at)
        values
            (new.report_id, new.namespace, new.kind, new.subject_id, new.dry_run, new.forced, new.reason,
             new.counts, new.partitions_dropped, new.oldest_event_at, new.newest_event_at, new.archive_path,
             new.run_id, new.created_at)
        on conflict (report_id, namespace) do nothing;
    end if;
    return null;
end;
$$;

create trigger deletion_reports_per_namespace
after insert on deletion_reports
for each row execute function strataflow_sync_deletion_namespaces();

-- What is there already.
insert into deletion_report_namespaces
    (report_id, namespace, kind, subject_id, dry_run, forced, reason, counts, partitions_dropped,
     oldest_event_at, newest_event_at, archive_path, run_id, created_at)
select
    dr.report_id, coalesce(n.key, dr.namespace) as namespace, dr.kind, dr.subject_id, dr.dry_run, dr.forced, dr.reason,
    coalesce(n.value, dr.counts) as counts, dr.partitions_dropped, dr.oldest_event_at, dr.newest_event_at,
    dr.archive_path, dr.run_id, dr.created_at
from deletion_reports as dr
left join lateral jsonb_each(
    case when jsonb_typeof(dr.counts -> 'by_namespace') = 'object' then dr.counts -> 'by_namespace'
    else '{}'::jsonb end
) as n on dr.namespace is null or n.key = dr.namespace
where coalesce(n.key, dr.namespace) is not null
on conflict (report_id, namespace) do nothing;

insert into pipeline_run_namespaces (run_id, namespace, flow, status, started_at, finished_at, counts, error)
select pr.run_id, pr.namespace, pr.flow, pr.status, pr.started_at, pr.finished_at, pr.counts, pr.error
from pipeline_runs as pr
where pr.namespace is not null;

select strataflow_attribute_run(pr.run_id)
from pipeline_runs as pr
where pr.namespace is null;
