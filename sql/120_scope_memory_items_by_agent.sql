-- Seed 003 agent scope: an item's identity includes its agent. One current row per
-- (namespace, subject_id, agent_id, kind, key), where a null agent_id (extracted items, items shared by the
-- whole namespace) is one scope of its own (nulls not distinct), so extraction keeps exactly one row per
-- (namespace, subject_id, kind, key) as before, and agent A's entry never overwrites agent B's.
-- History rows also keep the entry fields, so a change of type, name or description is versioned.
do $$
declare
    old_constraint text;
begin
    select c.conname into old_constraint
    from pg_constraint as c
    where c.conrelid = 'memory_items'::regclass and c.contype = 'u'
        and (select array_agg(a.attname::text order by a.attname)
             from pg_attribute as a
             where a.attrelid = c.conrelid and a.attnum = any(c.conkey))
            = array['key', 'kind', 'namespace', 'subject_id'];
    if old_constraint is not null then
        execute format('alter table memory_items drop constraint %I', old_constraint);
    end if;
end;
$$;

alter table memory_items
    add constraint memory_items_scope_key unique nulls not distinct (namespace, subject_id, agent_id, kind, key),
    add column created_at timestamptz not null default now();

update memory_items as mi
set created_at = coalesce(
    (
        select min(v.recorded_at) from memory_item_versions as v
        where v.item_id = mi.item_id
    ),
    mi.recorded_at
);

alter table memory_item_versions
    add column agent_id text,
    add column name text,
    add column description text,
    add column entry_type text,
    add column is_shared boolean;

update memory_item_versions as v
set agent_id = mi.agent_id, name = mi.name, description = mi.description, entry_type = mi.entry_type,
    is_shared = mi.is_shared
from memory_items as mi
where mi.item_id = v.item_id;

comment on column memory_items.created_at is 'When the item was first written (processing time).';
comment on column memory_item_versions.agent_id is 'The agent scope of the item (null: the whole namespace).';
comment on column memory_item_versions.name is 'Seed 003 entry name as of this version.';
comment on column memory_item_versions.description is 'Seed 003 entry description as of this version.';
comment on column memory_item_versions.entry_type is 'Seed 003 type (user, project, feedback, reference) as of this version.';
comment on column memory_item_versions.is_shared is 'Whether the entry was shared with the other agents as of this version.';
