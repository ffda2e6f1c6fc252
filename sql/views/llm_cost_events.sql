-- grain: one row per (namespace, event_day, stage, model, run_id) with at least one LLM request
-- The one definition of LLM calls, tokens and cost on event time: event_day is the day of the work a request
-- was about (llm_calls.event_at: the newest message of an extraction batch, a rolled-up week's start), else
-- the day it was sent, in the session time zone. llm_cost_daily, the dbt model mart_llm_cost and the
-- report's LLM plots all read this view, so a backfill's spend lands in the backfilled days everywhere.
-- Every request sent is one llm_calls row (retries and repairs included); cache hits send nothing.

create or replace view llm_cost_events with (security_invoker = true) as
with calls as (
    select
        lc.namespace,
        coalesce(lc.event_at, lc.created_at)::date as event_day,
        lc.stage,
        lc.model,
        lc.run_id,
        lc.outcome,
        lc.attempt,
        lc.prompt_tokens,
        lc.completion_tokens,
        lc.cost_usd,
        lc.latency_ms,
        lc.created_at
    from llm_calls as lc
),

final as (
    select
        c.namespace,
        c.event_day,
        c.stage,
        c.model,
        c.run_id,
        count(*) as count_calls,
        count(*) filter (where c.outcome <> 'ok') as count_failed_calls,
        count(*) filter (where c.attempt > 1) as count_retries,
        sum(c.prompt_tokens)::bigint as prompt_tokens,
        sum(c.completion_tokens)::bigint as completion_tokens,
        sum(c.prompt_tokens + c.completion_tokens)::bigint as total_tokens,
        coalesce(sum(c.cost_usd), 0)::numeric(14, 6) as cost_usd,
        coalesce(sum(c.latency_ms), 0)::bigint as latency_ms_total,
        min(c.created_at) as first_call_at,
        max(c.created_at) as last_call_at
    from calls as c
    group by c.namespace, c.event_day, c.stage, c.model, c.run_id
)

select * from final;

comment on view llm_cost_events is 'LLM spend on event time: one row per (namespace, event day, stage, model, run), the one definition of calls, tokens and cost that llm_cost_daily, mart_llm_cost and the report read.';
comment on column llm_cost_events.namespace is 'Namespace the requests were made for (null for requests outside any namespace).';
comment on column llm_cost_events.event_day is 'Day of the work the requests were about (llm_calls.event_at, else the day they were sent), session time zone.';
comment on column llm_cost_events.stage is 'Pipeline stage: extract, rollup, reflect, hot_summary.';
comment on column llm_cost_events.model is 'litellm model string.';
comment on column llm_cost_events.run_id is 'pipeline_runs.run_id of the run that sent the requests (null outside a run).';
comment on column llm_cost_events.count_calls is 'Requests sent (each retry and repair counts).';
comment on column llm_cost_events.count_failed_calls is 'Requests whose outcome was not ok (rate limited, timeout, invalid output, ...).';
comment on column llm_cost_events.count_retries is 'Requests that were a retry (attempt > 1).';
comment on column llm_cost_events.prompt_tokens is 'Prompt tokens sent.';
comment on column llm_cost_events.completion_tokens is 'Completion tokens received.';
comment on column llm_cost_events.total_tokens is 'prompt_tokens + completion_tokens.';
comment on column llm_cost_events.cost_usd is 'Cost in USD as litellm priced it (0 when the model has no known price, e.g. offline/rules).';
comment on column llm_cost_events.latency_ms_total is 'Sum of the requests'' latencies in milliseconds (divide by count_calls for the mean).';
comment on column llm_cost_events.first_call_at is 'When the first of these requests was sent (processing time).';
comment on column llm_cost_events.last_call_at is 'When the last of these requests was sent (processing time).';
