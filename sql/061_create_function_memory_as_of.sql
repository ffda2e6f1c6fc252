-- grain: one row per L2 item (namespace, subject_id, kind, key) as it stood at a point in time
-- Bi-temporal reading of memory_item_versions:
--   memory_as_of(ts)              what we knew at ts about what was true at ts (valid_from <= ts and
--                                 recorded_at <= ts): reproduces what an agent saw at ts;
--   memory_as_of(ts, now())       what we know today about what was true at ts (includes a backfill
--                                 recorded later with an older event time).
-- A version holds at ts when valid_from <= ts < valid_to, where valid_to counts only if the version had
-- been closed by known_at. Per item the holding version with the newest valid_from (then the highest
-- version) wins, the extractor's own rule ("newest event time wins"); an item whose winning version is a
-- deletion is left out. History-only rows (older statements, kept_older) hold within their interval; an
-- extracted value kept out of a manual item never holds.
-- security invoker: the caller's row-level security applies to memory_item_versions.

create function memory_as_of(ts timestamptz, known_at timestamptz default null)
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
            case when v.superseded_at <= coalesce(known_at, ts) then v.valid_to end as known_valid_to
        from memory_item_versions as v
        where v.valid_from <= ts
          and v.recorded_at <= coalesce(known_at, ts)
          and v.kind <> 'hot_summary'
          -- history-only rows (note set) count within their own valid interval; one without an end (an
          -- extracted value kept out of a manual item) never held
          and (v.note is null or v.valid_to is not null)
    ),

    true_versions as (
        select kv.*
        from known_versions as kv
        where kv.known_valid_to is null or kv.known_valid_to > ts
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

comment on function memory_as_of(timestamptz, timestamptz) is 'L2 memory as of a point in time: one row per item, the version true at ts as known at known_at (default ts). Columns: item_id, namespace, subject_id, kind, key, value, statement, category, importance, confidence, source (extracted|manual), version, action (new|content_modified|modified), valid_from (event time), recorded_at (processing time), source_message_ids.';
