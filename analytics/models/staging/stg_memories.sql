-- One row per current, active L2 item (the memories view).
select
    item_id,
    namespace,
    subject_id,
    agent_id,
    kind,
    key,
    is_manual,
    valid_from,
    recorded_at,
    updated_at
from {{ source('strataflow', 'memories') }}
