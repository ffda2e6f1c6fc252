-- Namespace isolation in the database itself: three group roles, a grants table, and a row-level security
-- policy on every table that carries a namespace column.
--
--   strataflow_pipeline  the flows: read and write every namespace
--   strataflow_agent     read the memory of its granted namespaces; write L2 items and profiles there
--   strataflow_analyst   read-only: SELECT on tables and analyst views of its granted namespaces
--
-- Privileges go on parent tables and views only, never ON ALL TABLES: a partition of conversation_messages
-- queried directly would skip its parent's policy, so no group has any privilege on a partition.
-- Superusers and the table owner role bypass RLS (FORCE binds non-superuser owners). Rerun
-- strataflow_apply_namespace_security() after adding a table or view with a namespace column
-- (`strataflow db upgrade` does so after every upgrade).

do $$
begin
    if not exists (select 1 from pg_roles where rolname = 'strataflow_pipeline') then
        create role strataflow_pipeline nologin;
    end if;
    if not exists (select 1 from pg_roles where rolname = 'strataflow_agent') then
        create role strataflow_agent nologin;
    end if;
    if not exists (select 1 from pg_roles where rolname = 'strataflow_analyst') then
        create role strataflow_analyst nologin;
    end if;
end;
$$;

-- Which login role may see which namespace. Read only through the function below: no group can select it.
create table namespace_grants (
    role_name text not null,
    namespace text not null,
    granted_at timestamptz not null default now(),
    primary key (role_name, namespace)
);
revoke all on namespace_grants from public;

-- The namespaces a role may see. security definer, so the policy can read the grants without giving the
-- caller access to the grants table; the role is passed in because inside the function current_user is the
-- owner. There is no session variable a client could set to widen its own access.
create function strataflow_visible_namespaces(role_name name) returns setof text
language sql stable security definer set search_path = public, pg_temp as $$
    select g.namespace from namespace_grants as g where g.role_name = $1
$$;
revoke all on function strataflow_visible_namespaces(name) from public;
grant execute on function strataflow_visible_namespaces(name)
    to strataflow_pipeline, strataflow_agent, strataflow_analyst;

create function strataflow_apply_namespace_security() returns integer
language plpgsql as $$
declare
    rel record;
    secured integer := 0;
    memory_writes constant text[] := array['memory_items', 'memory_item_versions', 'profile_documents'];
    agent_reads constant text[] := array[
        'conversation_messages', 'message_keys', 'memory_items', 'memory_item_versions', 'profile_documents',
        'weekly_reports', 'insights', 'asset_documents', 'asset_chunks'];
begin
    execute 'grant usage on schema public to strataflow_pipeline, strataflow_agent, strataflow_analyst';
    -- Tables (plain or partitioned parents, never partitions) with a namespace column.
    for rel in
        select c.relname, c.relkind
        from pg_class as c
        join pg_namespace as n on n.oid = c.relnamespace
        join pg_attribute as a on a.attrelid = c.oid and a.attname = 'namespace' and not a.attisdropped
        where n.nspname = 'public' and c.relkind in ('r', 'p') and not c.relispartition
            and c.relname <> 'namespace_grants'
    loop
        execute format('alter table %I enable row level security', rel.relname);
        execute format('alter table %I force row level security', rel.relname);
        execute format('drop policy if exists namespace_isolation on %I', rel.relname);
        execute format(
            'create policy namespace_isolation on %I for all using ('
            'pg_has_role(current_user, ''strataflow_pipeline'', ''member'') '
            'or namespace in (select strataflow_visible_namespaces(current_user))) with check ('
            'pg_has_role(current_user, ''strataflow_pipeline'', ''member'') '
            'or namespace in (select strataflow_visible_namespaces(current_user)))',
            rel.relname);
        execute format('grant select, insert, update, delete on %I to strataflow_pipeline', rel.relname);
        execute format('grant select on %I to strataflow_analyst', rel.relname);
        if rel.relname = any(agent_reads) then
            execute format('grant select on %I to strataflow_agent', rel.relname);
        end if;
        if rel.relname = any(memory_writes) then
            execute format('grant insert, update, delete on %I to strataflow_agent', rel.relname);
        end if;
        secured := secured + 1;
    end loop;
    -- Views with a namespace column: readable by analysts and agents. Forced to security_invoker, so the
    -- policies above apply through them (a definer view would read as its owner and see every namespace).
    for rel in
        select c.relname
        from pg_class as c
        join pg_namespace as n on n.oid = c.relnamespace
        join pg_attribute as a on a.attrelid = c.oid and a.attname = 'namespace' and not a.attisdropped
        where n.nspname = 'public' and c.relkind = 'v'
    loop
        execute format('alter view %I set (security_invoker = true)', rel.relname);
        execute format('grant select on %I to strataflow_analyst, strataflow_pipeline', rel.relname);
        execute format('grant select on %I to strataflow_agent', rel.relname);
        secured := secured + 1;
    end loop;
    execute 'grant usage on all sequences in schema public to strataflow_pipeline';
    return secured;
end;
$$;

select strataflow_apply_namespace_security();
