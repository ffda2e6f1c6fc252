-- A version records the item's metadata as it is when the version is written, beside the entry fields (123),
-- so each history entry shows its own version's metadata (a metadata-only update is a version of its own).
-- Same signature and rules as 123. Versions written before this migration have null metadata.
alter table memory_item_versions add column metadata jsonb;
comment on column memory_item_versions.metadata is
    'The item''s metadata as it was when this version was written (null: written before migration 310).';

create or replace function strataflow_record_item_version(
    p_item_id bigint,
    p_version integer,
    p_action text,
    p_value jsonb,
    p_statement text,
    p_category text,
    p_importance integer,
    p_confidence real,
    p_status text,
    p_source text,
    p_valid_from timestamptz,
    p_valid_to timestamptz,
    p_superseded boolean,
    p_source_message_ids bigint[],
    p_run_id uuid,
    p_prompt_version text,
    p_model text,
    p_note text,
    p_caller name default current_user
) returns bigint
language plpgsql security definer set search_path = public, pg_temp as $$
declare
    item record;
    new_version_id bigint;
begin
    select i.namespace, i.subject_id, i.kind, i.key, i.agent_id, i.name, i.description, i.entry_type,
        i.is_shared, i.metadata
    into item
    from memory_items as i where i.item_id = p_item_id;
    if not found then
        raise exception 'memory item % does not exist: history is written only for an existing item', p_item_id
            using errcode = 'foreign_key_violation';
    end if;
    if not strataflow_may_write_namespace(item.namespace, p_caller) then
        raise exception 'role % may not write the history of memory item % (row-level security)',
            p_caller, p_item_id using errcode = 'insufficient_privilege';
    end if;
    insert into memory_item_versions (item_id, namespace, subject_id, kind, key, version, action, value,
        statement, category, importance, confidence, status, source, valid_from, valid_to, superseded_at,
        source_message_ids, run_id, prompt_version, model, note, agent_id, name, description, entry_type,
        is_shared, metadata)
    values (p_item_id, item.namespace, item.subject_id, item.kind, item.key, p_version, p_action, p_value,
        p_statement, p_category, p_importance, p_confidence, p_status, p_source, p_valid_from, p_valid_to,
        case when p_superseded then now() end, coalesce(p_source_message_ids, '{}'), p_run_id,
        p_prompt_version, p_model, p_note, item.agent_id, item.name, item.description, item.entry_type,
        item.is_shared, item.metadata)
    returning version_id into new_version_id;
    return new_version_id;
end;
$$;
