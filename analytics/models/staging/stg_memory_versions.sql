-- One row per L2 item version (every change of an item), without the internal hot summaries.
select
    version_id,
    item_id,
    namespace,
    subject_id,
    kind,
    key,
    version,
    action,
    coalesce(valid_from, recorded_at) as event_at,
    recorded_at,
    run_id,
    model
from {{ source('strataflow', 'memory_item_versions') }}
where kind <> 'hot_summary'
