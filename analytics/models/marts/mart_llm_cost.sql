-- grain: one row per (run, namespace, stage, model) that sent at least one request to a model.
select
    c.run_id,
    r.flow,
    c.namespace,
    c.stage,
    c.model,
    min(c.created_at) as first_call_at,
    count(*) as calls,
    count(*) filter (where c.outcome <> 'ok') as failed_calls,
    sum(c.prompt_tokens) as prompt_tokens,
    sum(c.completion_tokens) as completion_tokens,
    sum(c.prompt_tokens + c.completion_tokens) as total_tokens,
    sum(c.cost_usd) as cost_usd
from {{ ref('stg_llm_calls') }} as c
left join {{ ref('stg_pipeline_runs') }} as r on r.run_id = c.run_id
group by c.run_id, r.flow, c.namespace, c.stage, c.model
