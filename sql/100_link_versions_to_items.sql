-- L2 history belongs to its item, in its item's namespace. memory_item_versions had no foreign key, so a
-- role allowed to write history in one namespace could add rows for another namespace's item (the history
-- and as-of reads went by item_id alone). Now (item_id, namespace) must name an existing memory_items row.
--
-- Rows that name no such item cannot have been written by the store (it writes the item first): they are
-- forged or left over, and are removed here so the constraint can be added.

delete from memory_item_versions as v
where not exists (
    select 1 from memory_items as i
    where i.item_id = v.item_id and i.namespace = v.namespace
);

alter table memory_items add constraint memory_items_item_namespace_key unique (item_id, namespace);

-- No cascade: deleting an item with history fails, so history goes only with a deliberate delete of the
-- versions first (forget does that); an agent cannot erase an item's history by deleting the item.
alter table memory_item_versions
    add constraint memory_item_versions_item_fkey
    foreign key (item_id, namespace) references memory_items (item_id, namespace);
-- memory_item_versions_item_idx (item_id, version) serves the key lookups of the constraint.
