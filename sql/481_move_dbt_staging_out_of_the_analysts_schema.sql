-- dbt's staging views and seeds go to a schema of their own, analytics_staging, which only the dbt group
-- (strataflow_transform) may use; schema analytics keeps the marts (and a team's own models), which analysts
-- read under row-level security. A BI tool pointed at schema analytics (Metabase's and Superset's schema
-- choice) listed the staging views and the profile_fields seed too: nine objects an analyst could not read.
-- The dbt project says so with `+schema: staging` (dbt names the schema analytics_staging). The copies built
-- into analytics before are dropped; one that another relation still reads (a team's view on a staging
-- view) is left in place with a notice.

create schema if not exists analytics_staging;
grant usage, create on schema analytics_staging to strataflow_transform;

do $$
declare
    rel record;
begin
    for rel in
        select c.relname, c.relkind
        from pg_class as c
        where c.relnamespace = to_regnamespace('analytics')
            and (
                (c.relkind = 'v' and c.relname in (
                    'stg_expired_messages', 'stg_expiry_reports', 'stg_llm_calls', 'stg_llm_cost_events',
                    'stg_memories', 'stg_memory_versions', 'stg_pipeline_run_namespaces', 'stg_pipeline_runs'
                ))
                or (c.relkind = 'r' and c.relname = 'profile_fields')
            )
    loop
        begin
            if rel.relkind = 'v' then
                execute format('drop view analytics.%I', rel.relname);
            else
                execute format('drop table analytics.%I', rel.relname);
            end if;
        exception when dependent_objects_still_exist or insufficient_privilege then
            raise notice 'kept analytics.% (%): the next dbt build makes its copy in analytics_staging',
                rel.relname, sqlerrm;
        end;
    end loop;
end;
$$;
