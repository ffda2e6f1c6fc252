-- grain: one row per (namespace, day, stage, model) with at least one LLM request
-- day is the event day of the work the requests were about (llm_cost_events, the one event-time definition
-- of calls, tokens and cost), in the session time zone (strataflow sets it to STRATAFLOW_TIMEZONE).
-- Every request sent is one llm_calls row (retries and repairs included); cache hits send nothing.

create or replace view llm_cost_daily with (security_invoker = true) as
with events as (
    select
        e.namespace,
        e.event_day,
        e.stage,
        e.model,
        e.count_calls,
        e.count_failed_calls,
        e.count_retries,
        e.prompt_tokens,
        e.completion_tokens,
        e.total_tokens,
        e.cost_usd,
        e.latency_ms_total
    from llm_cost_events as e
),

daily as (
    select
        ev.namespace,
        ev.event_day as day,
        ev.stage,
        ev.model,
        sum(ev.count_calls)::bigint as count_calls,
        sum(ev.count_failed_calls)::bigint as count_failed_calls,
        sum(ev.count_retries)::bigint as count_retries,
        sum(ev.prompt_tokens)::bigint as prompt_tokens,
        sum(ev.completion_tokens)::bigint as completion_tokens,
        sum(ev.total_tokens)::bigint as total_tokens,
        sum(ev.cost_usd)::numeric(14, 6) as cost_usd,
        round(sum(ev.latency_ms_total)::numeric / nullif(sum(ev.count_calls), 0))::integer as avg_latency_ms
    from events as ev
    group by ev.namespace, ev.event_day, ev.stage, ev.model
),

final as (
    select * from daily
)

select * from final;

comment on view llm_cost_daily is 'LLM spend: one row per (namespace, event day, stage, model), from llm_cost_events (the one event-time definition).';
comment on column llm_cost_daily.namespace is 'Namespace the requests were made for (null for requests outside any namespace).';
comment on column llm_cost_daily.day is 'Event day of the work the requests were about (llm_calls.event_at, else the day they were sent), session time zone (STRATAFLOW_TIMEZONE).';
comment on column llm_cost_daily.stage is 'Pipeline stage: extract, rollup, reflect, hot_summary.';
comment on column llm_cost_daily.model is 'litellm model string.';
comment on column llm_cost_daily.count_calls is 'Requests sent (each retry and repair counts).';
comment on column llm_cost_daily.count_failed_calls is 'Requests whose outcome was not ok (rate limited, timeout, invalid output, ...).';
comment on column llm_cost_daily.count_retries is 'Requests that were a retry (attempt > 1).';
comment on column llm_cost_daily.prompt_tokens is 'Prompt tokens sent.';
comment on column llm_cost_daily.completion_tokens is 'Completion tokens received.';
comment on column llm_cost_daily.total_tokens is 'prompt_tokens + completion_tokens.';
comment on column llm_cost_daily.cost_usd is 'Cost in USD as litellm priced it (0 when the model has no known price, e.g. offline/rules).';
comment on column llm_cost_daily.avg_latency_ms is 'Mean request latency in milliseconds.';
