-- One row per request sent to a model (retries and repairs included).
select
    call_id,
    run_id,
    namespace,
    stage,
    model,
    outcome,
    coalesce(prompt_tokens, 0) as prompt_tokens,
    coalesce(completion_tokens, 0) as completion_tokens,
    coalesce(cost_usd, 0) as cost_usd,
    created_at
from {{ source('strataflow', 'llm_calls') }}
