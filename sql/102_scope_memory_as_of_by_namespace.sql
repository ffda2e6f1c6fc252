-- grain: one row per L2 item (namespace, subject_id, kind, key) as it stood at a point in time
-- memory_as_of (061) read memory_item_versions by item id alone, so a history row written under another
-- namespace changed what an item's namespace saw. Now every version must sit in its item's namespace (a join
-- on (item_id, namespace), the key that 100 enforces), and an optional third argument limits the result to
-- one namespace inside the function. The bi-temporal rules are those of 061, unchanged:
--   memory_as_of(ts)                    what we knew at ts about what was true at ts;
--   memory_as_of(ts, now())             what we know today about what was true at ts;
--   memory_as_of(ts, null, 'alpha')     the first, for namespace alpha only.
-- security invoker: the caller's row-level security applies to memory_item_versions and memory_items.

drop function memory_as_of(timestamptz, timestamptz);

create function memory_as_of(ts timestamptz, known_at timestamptz default null, only_namespace text default null)
returns table (
    item_id bigint,
    namespace text,
    subject_id text,
    kind text,
    key text,
    value jsonb,
    statement text,
    category text,
    importance integer,
    confidence real,
    source text,
    version integer,
    action text,
    valid_from timestamptz,
    recorded_at timestamptz,
    source_message_ids bigint[]
)
language sql stable security invoker as $$
    with known_versions as (
        select
            v.*,
            -- a version closed after known_at was still open as far as we knew then
            case when v.superseded_at <= coalesce(memory_as_of.known_at, memory_as_of.ts) then v.valid_to end
                as known_valid_to
        from memory_item_versions as v
        join memory_items as i on i.item_id = v.item_id and i.namespace = v.namespace
        where (memory_as_of.only_namespace is null or v.namespace = memory_as_of.only_namespace)
          and v.valid_from <= memory_as_of.ts
          and v.recorded_at <= coalesce(memory_as_of.known_at, memory_as_of.ts)
          and v.kind <> 'hot_summary'
          -- history-only rows (note set) count within their own valid interval; one without an end (an
          -- extracted value kept out of a manual item) never held
          and (v.note is null or v.valid_to is not null)
    ),

    true_versions as (
        select kv.*
        from known_versions as kv
        where kv.known_valid_to is null or kv.known_valid_to > memory_as_of.ts
    ),

    winning_versions as (
        select distinct on (tv.item_id) tv.*
        from true_versions as tv
        order by tv.item_id, tv.valid_from desc, tv.version desc, tv.version_id desc
    ),

    final as (
        select
            wv.item_id, wv.namespace, wv.subject_id, wv.kind, wv.key, wv.value, wv.statement, wv.category,
            wv.importance, wv.confidence, wv.source, wv.version, wv.action, wv.valid_from, wv.recorded_at,
            wv.source_message_ids
        from winning_versions as wv
        where wv.action <> 'deleted' and wv.status <> 'deleted'
    )

    select * from final
$$;

comment on function memory_as_of(timestamptz, timestamptz, text) is 'L2 memory as of a point in time: one row per item, the version true at ts as known at known_at (default ts), only versions in their item''s namespace, optionally one namespace (only_namespace). Columns: item_id, namespace, subject_id, kind, key, value, statement, category, importance, confidence, source (extracted|manual), version, action (new|content_modified|modified), valid_from (event time), recorded_at (processing time), source_message_ids.';
