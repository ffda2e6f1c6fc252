-- One row per L1 message that expiry removed (its key stays in message_keys with expired_at).
select
    namespace,
    message_id,
    event_at,
    expired_at
from {{ source('strataflow', 'message_keys') }}
where expired_at is not null
