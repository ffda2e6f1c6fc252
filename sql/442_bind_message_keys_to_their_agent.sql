-- A message belongs to the agent that wrote it, in its key too (issue 46, R8). Before, an agent-bound key
-- could post under another agent's message id: the online write re-keyed message_keys (which had no agent)
-- and remove_rewritten_messages then dropped the other agent's L1 row for the new text. Now each key records
-- its message's agent, and a transaction bound to an agent (strataflow.agent, sql/320) may create or change
-- only keys of that agent: a re-post under another agent's id, or under a message of the namespace's (no
-- agent), fails with insufficient_privilege (403) before anything is rewritten. Unbound transactions (the
-- pipeline, a key bound to no agent) are held by the namespace policy alone, as before.

alter table message_keys add column agent_id text;

update message_keys as k
set agent_id = m.agent_id
from conversation_messages as m
where m.message_id = k.message_id and m.agent_id is not null;

comment on column message_keys.agent_id is
'Agent that wrote the message (conversation_messages.agent_id; null: the namespace''s). A transaction bound to an agent may create or change only its own keys.';

create function strataflow_check_key_agent() returns trigger
language plpgsql set search_path = public, pg_temp as $$
declare
    bound text := strataflow_bound_agent();
begin
    if bound is not null
        and ((tg_op = 'UPDATE' and old.agent_id is distinct from bound) or new.agent_id is distinct from bound) then
        raise exception 'this transaction acts as agent %; message % is not its own', bound, new.source_message_id
            using errcode = 'insufficient_privilege';
    end if;
    return new;
end;
$$;

create trigger message_keys_agent_binding
before insert or update on message_keys
for each row execute function strataflow_check_key_agent();
