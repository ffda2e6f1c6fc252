-- An API key may belong to one agent of its role (`strataflow access create-key NAME --role ROLE --agent ID`):
-- every request with it acts as that agent (its private entries, shared ones and the namespace's), and a
-- request naming another agent is refused (403). A key with no agent sees no agent's private entries.
alter table api_keys add column agent_id text;
alter table api_keys add constraint api_keys_agent_id_check check (
    agent_id is null or (length(agent_id) between 1 and 512 and agent_id !~ '[[:cntrl:]/]')
);

comment on column api_keys.agent_id is 'The agent every request with this key acts as; null: a key bound to no agent.';
