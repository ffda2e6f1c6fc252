-- Seed 004 MemoryNode.key: several keys per item, to find every memory about one entity ("Emery", "database").
-- keys is computed from the row: the item key, the key without its kind prefix (person_emery -> emery), the
-- seed 003 entry name, the entity names in the value (name, decision, about), the category and any keys the
-- writer listed in metadata.keys. Lower case; a GIN index answers keys && array['emery'].
create function strataflow_item_keys(
    item_key text, entry_name text, item_value jsonb, item_category text, item_metadata jsonb
) returns text[]
language sql immutable parallel safe as $$
    select coalesce(array_agg(distinct k order by k), '{}')
    from (
        select lower(btrim(k)) as k
        from unnest(array[
            item_key,
            nullif(regexp_replace(item_key, '^(person|decision|status|preference|feedback|intent|place|project|routine)_', ''), item_key),
            entry_name,
            case when jsonb_typeof(item_value) = 'object' then item_value ->> 'name' end,
            case when jsonb_typeof(item_value) = 'object' then item_value ->> 'decision' end,
            case when jsonb_typeof(item_value) = 'object' then item_value ->> 'about' end,
            item_category
        ]) as k
        union all
        select lower(btrim(k))
        from jsonb_array_elements_text(
            case when jsonb_typeof(item_metadata -> 'keys') = 'array' then item_metadata -> 'keys' else '[]' end
        ) as k
    ) as candidates
    where k is not null and btrim(k) <> ''
$$;

alter table memory_items
    add column keys text[] generated always as (
        strataflow_item_keys(key, name, value, category, metadata)
    ) stored;
create index memory_items_keys_idx on memory_items using gin (keys);

comment on column memory_items.keys is
    'Seed 004 keys: the item key, its entity (person_emery -> emery), name, value name/decision/about, category and metadata.keys, lower case.';
