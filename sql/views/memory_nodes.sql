-- grain: one row per L2 memory item (namespace, subject_id, agent_id, kind, key), deleted ones included
-- Seed 004 MemoryNode over L2: keys, action status (the last change: new, content_modified, modified,
-- deleted), store status (valid, deleted), the day it became true, and the observation counters:
-- obs_reflected = insights (current or superseded) that cite the item as evidence, i.e. reflections over it;
-- obs_updated = versions that changed it after it was created (content_modified or modified).

create or replace view memory_nodes with (security_invoker = true) as
with items as (
    select
        mi.item_id,
        mi.namespace,
        mi.subject_id,
        mi.agent_id,
        mi.kind,
        mi.key,
        mi.keys,
        mi.name,
        mi.statement,
        mi.value,
        mi.status,
        mi.importance,
        mi.confidence,
        mi.valid_from,
        mi.updated_at
    from memory_items as mi
    where mi.kind <> 'hot_summary'
),

last_change as (
    select distinct on (v.item_id)
        v.item_id,
        v.action
    from memory_item_versions as v
    where v.note is null
    order by v.item_id asc, v.version desc, v.version_id desc
),

updates as (
    select
        v.item_id,
        count(*) as count_updates
    from memory_item_versions as v
    where v.note is null and v.action in ('content_modified', 'modified')
    group by v.item_id
),

final as (
    select
        it.item_id as memory_id,
        it.namespace,
        it.subject_id,
        it.agent_id,
        it.kind as memory_type,
        it.key,
        it.keys,
        coalesce(it.name, it.key) as target_name,
        coalesce(it.statement, it.value::text) as content,
        it.value,
        coalesce(lc.action, 'none') as action_status,
        case when it.status = 'active' then 'valid' else 'deleted' end as store_status,
        it.valid_from::date as dt,
        (
            select count(*) from insights as i
            where i.namespace = it.namespace and i.subject_id = it.subject_id
                and i.evidence_item_ids @> array[it.item_id]
        ) as obs_reflected,
        coalesce(u.count_updates, 0) as obs_updated,
        it.importance::real / 100 as score_rank,
        it.confidence,
        it.updated_at
    from items as it
    left join last_change as lc on lc.item_id = it.item_id
    left join updates as u on u.item_id = it.item_id
)

select * from final;

comment on view memory_nodes is
    'Seed 004 MemoryNode: one row per L2 item (deleted ones included) with keys, action and store status and the observation counters.';
comment on column memory_nodes.memory_id is 'memory_items.item_id';
comment on column memory_nodes.namespace is 'scope: project, agent or app';
comment on column memory_nodes.subject_id is 'scope: the user the memory is about (seed 004 userName)';
comment on column memory_nodes.agent_id is 'the agent that owns the item; null for the whole namespace';
comment on column memory_nodes.memory_type is 'memory kind (seed 004 memoryType)';
comment on column memory_nodes.key is 'the item key (unique per scope and kind)';
comment on column memory_nodes.keys is 'seed 004 keys: every key the item can be found by (memory_items.keys)';
comment on column memory_nodes.target_name is 'seed 004 targetName: the entry name, else the key';
comment on column memory_nodes.content is 'the statement (seed 004 content), else the value as text';
comment on column memory_nodes.value is 'the value as JSON';
comment on column memory_nodes.action_status is 'last change: new, content_modified, modified or deleted (none without history)';
comment on column memory_nodes.store_status is 'valid (active) or deleted';
comment on column memory_nodes.dt is 'the day the current value became true (valid_from, session time zone)';
comment on column memory_nodes.obs_reflected is 'reflections over the item: insights (current or superseded) citing it as evidence';
comment on column memory_nodes.obs_updated is 'updates of the item: versions with action content_modified or modified';
comment on column memory_nodes.score_rank is 'importance / 100 (seed 004 scoreRank)';
comment on column memory_nodes.confidence is 'confidence 0-1 of the current value';
comment on column memory_nodes.updated_at is 'when the item row last changed';
