-- A run over every namespace leaves its per-namespace trace as it writes, not only when it closes: the ingest
-- calls strataflow_note_run_namespaces in each chunk's transaction for the namespaces of the rows it wrote.
-- A run killed after its ingest (kill -9, out of memory) then already has a pipeline_run_namespaces row in
-- every namespace whose L1 rows it wrote, and when the next run marks it crashed (the trigger of sql/330
-- copies the parent's state) each of those namespaces' analysts counts it in pipeline_health.count_crashed.
-- Before, such a run showed only as namespace '*' (visible to the pipeline and the owner): its L1 rows carry
-- its run id, but nothing per namespace was written until the run closed (strataflow_attribute_run).
--
-- The row starts with the parent's state (running) and empty counts; strataflow_attribute_run merges the
-- counts in when the run closes. A run limited to one namespace already has its row (sql/330's trigger),
-- and an id with no pipeline_runs row (a write outside any run) notes nothing. Returns the rows added.

create function strataflow_note_run_namespaces(p_run_id uuid, p_namespaces text[]) returns integer
language plpgsql as $$
declare
    run pipeline_runs%rowtype;
    added integer;
begin
    select * into run from pipeline_runs where run_id = p_run_id;
    if not found or run.namespace is not null then
        return 0;
    end if;
    insert into pipeline_run_namespaces (run_id, namespace, flow, status, started_at, finished_at, counts, error)
    select distinct run.run_id, n.namespace, run.flow, run.status, run.started_at, run.finished_at, '{}'::jsonb,
        strataflow_namespace_error(run.error, n.namespace)
    from unnest(p_namespaces) as n (namespace)
    where n.namespace is not null
    on conflict (run_id, namespace) do nothing;
    get diagnostics added = row_count;
    return added;
end;
$$;

comment on function strataflow_note_run_namespaces(uuid, text[]) is 'Record that a run over every namespace wrote to these namespaces (one pipeline_run_namespaces row each, in the writing transaction), so a run that dies before it closes is still seen per namespace.';
