-- One row per (namespace, event day, stage, model, run) with LLM requests: the view llm_cost_events, the one
-- event-time definition of calls, tokens and cost (the view llm_cost_daily and the report read it too).
select
    namespace,
    event_day,
    stage,
    model,
    run_id,
    count_calls,
    count_failed_calls,
    prompt_tokens,
    completion_tokens,
    total_tokens,
    cost_usd,
    first_call_at,
    last_call_at
from {{ source('strataflow', 'llm_cost_events') }}
