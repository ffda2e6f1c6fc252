-- grain: one row per (event_day, run, namespace, stage, model) that sent at least one request to a model.
-- Incremental on recording time: a build re-reads the groups with a request recorded (llm_calls.created_at,
-- the group's last_call_at) since the newest one already built, minus var('llm_cost_lookback_days')
-- (default 1: requests a transaction still held open at the last build), and replaces those groups' rows by
-- cost_key with their totals. Spend recorded late for an old event day (a weekly's rollup retried days
-- after its week, a backfill) is therefore in the next plain build: the window counts back from when spend
-- was recorded, not from the newest event day. Calls, tokens and cost come from stg_llm_cost_events, the
-- one event-time definition the view llm_cost_daily and the report read too.
{{ config(
    materialized='incremental',
    unique_key='cost_key',
    incremental_strategy='delete+insert',
    on_schema_change='append_new_columns',
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
    c.last_call_at,
    c.count_calls::bigint as calls,
    c.count_failed_calls::bigint as failed_calls,
    c.prompt_tokens::bigint as prompt_tokens,
    c.completion_tokens::bigint as completion_tokens,
    c.total_tokens::bigint as total_tokens,
    c.cost_usd::numeric(14, 6) as cost_usd
from {{ ref('stg_llm_cost_events') }} as c
left join {{ ref('stg_pipeline_runs') }} as r on r.run_id = c.run_id
{% if is_incremental() %}
    -- a table built before last_call_at existed has nulls there: everything is read again once
    where c.last_call_at >= (
        select coalesce(max(t.last_call_at), '-infinity'::timestamptz)
            - make_interval(days => {{ var('llm_cost_lookback_days', 1) | int }})
        from {{ this }} as t
    )
{% endif %}
