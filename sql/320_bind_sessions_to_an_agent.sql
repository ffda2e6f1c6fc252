-- The agent of an agent-bound API key, enforced by the database (issue 36 item 5). The API opens a request of
-- such a key with `set_config('strataflow.agent', AGENT, true)` (local to the transaction:
-- strataflow.db.roles.as_agent); the restrictive policies below then bind the transaction to that agent on
-- top of the namespace policy, so a handler that forgets Caller.agent_for cannot leak or rewrite another
-- agent's rows:
--   memory_items, memory_item_versions  visible: no agent, shared, or the bound agent's own
--                                       (strataflow_item_visible, sql/250); written: no agent or the bound one
--   conversation_messages               visible and written: no agent or the bound one
-- A transaction that sets no agent (the pipeline, an analyst, a key bound to no agent) is not restricted by
-- these policies. The setting only narrows what a role already sees: it cannot widen anything.

create function strataflow_bound_agent() returns text
language sql stable parallel safe as $$
    select nullif(current_setting('strataflow.agent', true), '')
$$;

comment on function strataflow_bound_agent() is
'The agent the current transaction is bound to (strataflow.agent, set by the API for an agent-bound key), or
null when it is bound to none.';

create policy agent_binding on memory_items as restrictive for all
using (
    strataflow_bound_agent() is null
    or strataflow_item_visible(agent_id, is_shared, strataflow_bound_agent())
)
with check (strataflow_bound_agent() is null or agent_id is null or agent_id = strataflow_bound_agent());

create policy agent_binding on memory_item_versions as restrictive for all
using (
    strataflow_bound_agent() is null
    or strataflow_item_visible(agent_id, is_shared, strataflow_bound_agent())
);

create policy agent_binding on conversation_messages as restrictive for all
using (strataflow_bound_agent() is null or agent_id is null or agent_id = strataflow_bound_agent())
with check (strataflow_bound_agent() is null or agent_id is null or agent_id = strataflow_bound_agent());

-- History is written by security definer functions (sql/101, 123), which bypass row-level security: a
-- trigger holds them to the same binding.
create function strataflow_check_version_agent() returns trigger
language plpgsql as $$
begin
    if strataflow_bound_agent() is not null and new.agent_id is not null
        and new.agent_id <> strataflow_bound_agent() then
        raise exception 'this transaction acts as agent %; it may not write the history of agent %''s item %',
            strataflow_bound_agent(), new.agent_id, new.item_id using errcode = 'insufficient_privilege';
    end if;
    return new;
end;
$$;

create trigger memory_item_versions_agent_binding
before insert or update on memory_item_versions
for each row execute function strataflow_check_version_agent();
