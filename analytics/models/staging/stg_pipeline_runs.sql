-- One row per pipeline run (flows and CLI stages).
select
    run_id,
    flow,
    namespace,
    status,
    started_at,
    finished_at
from {{ source('strataflow', 'pipeline_runs') }}
