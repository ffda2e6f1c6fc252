-- L2 history is written only through the store. Agent roles lose INSERT, UPDATE and DELETE on
-- memory_item_versions; the store (strataflow/memory/store.py) records and closes versions through the two
-- security definer functions below, which take the namespace, subject, kind and key from the item itself and
-- check that the caller may write that item's namespace (the same rule as the row-level security policy).
--
-- Identity values are never chosen by an agent: wherever agents may INSERT or UPDATE, they get column
-- privileges that leave out identity (and generated) columns, so `overriding system value` is refused.
-- strataflow_restrict_agent_writes() applies both rules; `strataflow db upgrade` runs it after
-- strataflow_apply_namespace_security() (which grants table-wide privileges) on every upgrade.

-- May the calling role write rows of this namespace? caller defaults to the caller's current_user (a default
-- is evaluated in the caller's context); a caller given explicitly must be a role the session's login role
-- is a member of, as strataflow_visible_namespaces (092) requires, so no role can act as another.
create function strataflow_may_write_namespace(target_namespace text, caller name) returns boolean
language sql stable set search_path = public, pg_temp as $$
    select exists (select 1 from pg_roles as r where r.rolname = caller)
        and pg_has_role(session_user, caller, 'member')
        and (
            (select r.rolsuper from pg_roles as r where r.rolname = caller)
            or pg_has_role(caller, 'strataflow_pipeline', 'member')
            or target_namespace in (select strataflow_visible_namespaces(caller))
        )
$$;
revoke all on function strataflow_may_write_namespace(text, name) from public;

create function strataflow_record_item_version(
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
    select i.namespace, i.subject_id, i.kind, i.key into item from memory_items as i where i.item_id = p_item_id;
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
        source_message_ids, run_id, prompt_version, model, note)
    values (p_item_id, item.namespace, item.subject_id, item.kind, item.key, p_version, p_action, p_value,
        p_statement, p_category, p_importance, p_confidence, p_status, p_source, p_valid_from, p_valid_to,
        case when p_superseded then now() end, coalesce(p_source_message_ids, '{}'), p_run_id,
        p_prompt_version, p_model, p_note)
    returning version_id into new_version_id;
    return new_version_id;
end;
$$;
revoke all on function strataflow_record_item_version(
    bigint, integer, text, jsonb, text, text, integer, real, text, text, timestamptz, timestamptz, boolean,
    bigint[], uuid, text, text, text, name) from public;
grant execute on function strataflow_record_item_version(
    bigint, integer, text, jsonb, text, text, integer, real, text, text, timestamptz, timestamptz, boolean,
    bigint[], uuid, text, text, text, name) to strataflow_pipeline, strataflow_agent;

-- Close the open version of an item (the store does it when a newer statement replaces it).
create function strataflow_close_item_version(
    p_item_id bigint, p_version integer, p_valid_to timestamptz, p_caller name default current_user
) returns integer
language plpgsql security definer set search_path = public, pg_temp as $$
declare
    item_namespace text;
    closed integer;
begin
    select i.namespace into item_namespace from memory_items as i where i.item_id = p_item_id;
    if not found then
        return 0;
    end if;
    if not strataflow_may_write_namespace(item_namespace, p_caller) then
        raise exception 'role % may not write the history of memory item % (row-level security)',
            p_caller, p_item_id using errcode = 'insufficient_privilege';
    end if;
    update memory_item_versions set valid_to = p_valid_to, superseded_at = now()
    where item_id = p_item_id and namespace = item_namespace and version = p_version
        and superseded_at is null;
    get diagnostics closed = row_count;
    return closed;
end;
$$;
revoke all on function strataflow_close_item_version(bigint, integer, timestamptz, name) from public;
grant execute on function strataflow_close_item_version(bigint, integer, timestamptz, name)
    to strataflow_pipeline, strataflow_agent;

create function strataflow_restrict_agent_writes() returns integer
language plpgsql as $$
declare
    rel record;
    cols text;
    restricted integer := 0;
    history_tables constant text[] := array['memory_item_versions'];
begin
    for rel in
        select c.oid, c.relname
        from pg_class as c
        join pg_namespace as n on n.oid = c.relnamespace
        where n.nspname = 'public' and c.relkind in ('r', 'p') and not c.relispartition
    loop
        if rel.relname = any(history_tables) then
            execute format('revoke insert, update, delete, truncate on %I from strataflow_agent', rel.relname);
            restricted := restricted + 1;
            continue;
        end if;
        if not exists (select 1 from pg_attribute as a
                       where a.attrelid = rel.oid and a.attnum > 0 and not a.attisdropped
                         and (a.attidentity <> '' or a.attgenerated <> '')) then
            continue;
        end if;
        if not (has_table_privilege('strataflow_agent', rel.oid, 'insert')
                or has_table_privilege('strataflow_agent', rel.oid, 'update')) then
            continue;
        end if;
        select string_agg(quote_ident(a.attname), ', ' order by a.attnum) into cols
        from pg_attribute as a
        where a.attrelid = rel.oid and a.attnum > 0 and not a.attisdropped
            and a.attidentity = '' and a.attgenerated = '';
        -- Revoking at table level also drops the column privileges; then grant the columns again.
        execute format('revoke insert, update on %I from strataflow_agent', rel.relname);
        execute format('grant insert (%s), update (%s) on %I to strataflow_agent', cols, cols, rel.relname);
        restricted := restricted + 1;
    end loop;
    return restricted;
end;
$$;

select strataflow_restrict_agent_writes();
