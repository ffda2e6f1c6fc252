-- The LLM answer cache is keyed by namespace as well as by the work: a namespace never gets another
-- namespace's cached answer (save_info answered `llm_calls: 0` when any tenant had sent the same text, an
-- oracle of what other tenants send, and handed over their model output). Rows written before keep the
-- namespace they were first written for; an answer cached without a namespace is found only by work
-- without one.
alter table llm_cache drop constraint llm_cache_pkey;
create unique index llm_cache_work_idx on llm_cache (
    stage, prompt_version, model, (coalesce(namespace, '')), input_hash
);

comment on table llm_cache is 'Parsed LLM answers, one per piece of work and namespace (stage, prompt version, model, namespace, input hash).';
