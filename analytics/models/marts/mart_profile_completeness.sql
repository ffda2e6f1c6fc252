-- grain: one row per (namespace, completeness bucket) with at least one subject.
-- A subject's completeness is the share of the profile vocabulary (seed profile_fields) its current L2
-- items fill, as `strataflow summarize` scores it; buckets are 20 points wide.
with fields as (
    select count(*) as total from {{ ref('profile_fields') }}
),

subjects as (
    select
        m.namespace,
        m.subject_id,
        count(distinct p.key) as filled_fields
    from {{ ref('stg_memories') }} as m
    left join {{ ref('profile_fields') }} as p on p.key = m.key
    where m.agent_id is null
    group by m.namespace, m.subject_id
),

scored as (
    select
        s.namespace,
        s.subject_id,
        s.filled_fields,
        round(100.0 * s.filled_fields / nullif(f.total, 0))::integer as score
    from subjects as s
    cross join fields as f
),

bucketed as (
    select
        namespace,
        score,
        filled_fields,
        least(score / 20 * 20, 80) as bucket_from
    from scored
)

select
    namespace,
    case when bucket_from = 80 then '80-100' else bucket_from || '-' || bucket_from + 19 end
        as completeness_bucket,
    bucket_from,
    count(*) as subjects,
    round(avg(score), 1) as avg_score,
    round(avg(filled_fields), 1) as avg_filled_fields
from bucketed
group by namespace, bucket_from
