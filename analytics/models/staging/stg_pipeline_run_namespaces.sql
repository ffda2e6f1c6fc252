-- One row per (pipeline run, namespace it worked in): a run over every namespace appears once per namespace
-- it touched, with that namespace's counts (sql/330).
select
    run_id,
    namespace,
    flow,
    status,
    started_at,
    finished_at,
    counts
from {{ source('strataflow', 'pipeline_run_namespaces') }}
