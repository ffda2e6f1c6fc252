-- The schema the dbt project in analytics/ builds into, and the group role that builds it.
--
--   strataflow_transform  dbt (`strataflow analytics build` logs in as its member strataflow_dbt): reads the
--                         tables and views of every namespace, under row-level security through a policy
--                         for SELECT only, and creates relations in schema analytics only (no write on any
--                         table of public, no CREATE there).
--
-- It is a member of strataflow_analyst for that group's SELECT grants on parent tables and views (never on
-- partitions), so it reads exactly what analysts may read, in every namespace. Analysts get USAGE on the
-- schema; each mart carries a namespace column and its own policy (analytics/macros/secure_mart.sql), so an
-- analyst role sees only its granted namespaces there too. `strataflow db upgrade` reruns
-- strataflow_apply_transform_security() after every upgrade, like strataflow_apply_namespace_security().

-- The event time of the work a request was about (extraction: its newest message; rollup: the week's
-- start; hot summary: the newest message), so spend can be shown on event time (the report, the marts):
-- after a backfill the tokens land in the backfilled weeks, not on the day the backfill ran.
alter table llm_calls add column event_at timestamptz;
comment on column llm_calls.event_at is 'Event time of the work the request was about: the newest message of an extraction batch or hot summary, the start of a rolled-up week; null when the work has no event time (reflection).';

do $$
begin
    if not exists (select 1 from pg_roles where rolname = 'strataflow_transform') then
        create role strataflow_transform nologin;
    end if;
end;
$$;

grant strataflow_analyst to strataflow_transform;

create schema if not exists analytics;
grant usage on schema analytics to strataflow_analyst;
grant usage, create on schema analytics to strataflow_transform;

create function strataflow_apply_transform_security() returns integer
language plpgsql as $$
declare
    rel record;
    secured integer := 0;
begin
    for rel in
        select c.relname
        from pg_class as c
        join pg_namespace as n on n.oid = c.relnamespace
        join pg_attribute as a on a.attrelid = c.oid and a.attname = 'namespace' and not a.attisdropped
        where n.nspname = 'public' and c.relkind in ('r', 'p') and not c.relispartition
            and c.relname <> 'namespace_grants'
    loop
        execute format('drop policy if exists transform_read on %I', rel.relname);
        execute format('create policy transform_read on %I for select to strataflow_transform using (true)',
            rel.relname);
        secured := secured + 1;
    end loop;
    return secured;
end;
$$;

select strataflow_apply_transform_security();
