-- grain: one row per (event_day, run, namespace, stage, model) that sent at least one request to a model.
-- Incremental on event time: a run rebuilds the event days from the latest one built minus
-- var('llm_cost_lookback_days') (default 7: late backfills of older days need --full-refresh or a larger
-- lookback), replacing those days' rows by cost_key. Calls, tokens and cost come from stg_llm_cost_events,
-- the one event-time definition the view llm_cost_daily and the report read too.
{{ config(
    materialized='incremental',
    unique_key='cost_key',
    incremental_strategy='delete+insert',
    on_schema_change='fail',
) }}

select
    md5(concat_ws('|', c.event_day, c.run_id, c.namespace, c.stage, c.model)) as cost_key,
    c.event_day,
    c.run_id,
    r.flow,
    c.namespace,
    c.stage,
    c.model,
    c.first_call_at,
    c.count_calls::bigint as calls,
    c.count_failed_calls::bigint as failed_calls,
    c.prompt_tokens::bigint as prompt_tokens,
    c.completion_tokens::bigint as completion_tokens,
    c.total_tokens::bigint as total_tokens,
    c.cost_usd::numeric(14, 6) as cost_usd
from {{ ref('stg_llm_cost_events') }} as c
left join {{ ref('stg_pipeline_runs') }} as r on r.run_id = c.run_id
{% if is_incremental() %}
    where c.event_day >= (
        select coalesce(max(t.event_day), '1900-01-01'::date) - {{ var('llm_cost_lookback_days', 7) | int }}
        from {{ this }} as t
    )
{% endif %}
