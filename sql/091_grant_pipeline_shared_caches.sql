-- The pipeline group also writes the tables that carry no namespace (so no policy): embedding_cache (text ->
-- vector, shared by every namespace) and any later table of that kind. Without it a non-superuser pipeline
-- login (an external server) cannot embed, and `strataflow forget` cannot drop a forgotten subject's cached
-- vectors. namespace_grants and schema_migrations stay out of reach: only the owner changes access or schema.
-- Agents and analysts get nothing here: a cache keyed by text alone cannot be scoped to a namespace.
do $$
declare
    rel record;
begin
    for rel in
        select c.relname
        from pg_class as c
        join pg_namespace as n on n.oid = c.relnamespace
        where n.nspname = 'public' and c.relkind in ('r', 'p') and not c.relispartition
            and c.relname not in ('namespace_grants', 'schema_migrations')
            and not exists (select 1 from pg_attribute as a
                            where a.attrelid = c.oid and a.attname = 'namespace' and not a.attisdropped)
    loop
        execute format('grant select, insert, update, delete on %I to strataflow_pipeline', rel.relname);
    end loop;
end;
$$;
