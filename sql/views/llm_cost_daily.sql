-- grain: one row per (namespace, day, stage, model) with at least one LLM request
-- day is the calendar day of the request in the session time zone (strataflow sets it to STRATAFLOW_TIMEZONE).
-- Every request sent is one llm_calls row (retries and repairs included); cache hits send nothing.

create or replace view llm_cost_daily with (security_invoker = true) as
with calls as (
    select
        lc.namespace,
        lc.created_at::date as day,
        lc.stage,
        lc.model,
        lc.outcome,
        lc.attempt,
        lc.prompt_tokens,
        lc.completion_tokens,
        lc.cost_usd,
        lc.latency_ms
    from llm_calls as lc
),

daily as (
    select
        c.namespace,
        c.day,
        c.stage,
        c.model,
        count(*) as count_calls,
        count(*) filter (where c.outcome <> 'ok') as count_failed_calls,
        count(*) filter (where c.attempt > 1) as count_retries,
        sum(c.prompt_tokens)::bigint as prompt_tokens,
        sum(c.completion_tokens)::bigint as completion_tokens,
        sum(c.prompt_tokens + c.completion_tokens)::bigint as total_tokens,
        coalesce(sum(c.cost_usd), 0)::numeric(14, 6) as cost_usd,
        round(avg(c.latency_ms))::integer as avg_latency_ms
    from calls as c
    group by c.namespace, c.day, c.stage, c.model
),

final as (
    select * from daily
)

select * from final;

comment on view llm_cost_daily is 'LLM spend: one row per (namespace, day, stage, model), from the llm_calls ledger.';
comment on column llm_cost_daily.namespace is 'Namespace the requests were made for (null for requests outside any namespace).';
comment on column llm_cost_daily.day is 'Calendar day of the requests in the session time zone (STRATAFLOW_TIMEZONE).';
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
