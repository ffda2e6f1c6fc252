-- Seed 003 entries: a name in any language, a description, the seed's type, and whether an agent's entry is
-- shared with the other agents of its namespace. Columns only: the identity (unique scope) and the API that
-- fills them come with the service work. An item with no agent_id is visible to every agent; an item with an
-- agent_id is visible to that agent, and to the others only when is_shared.
alter table memory_items
    add column name text,
    add column description text,
    add column entry_type text check (entry_type in ('user', 'project', 'feedback', 'reference')),
    add column is_shared boolean not null default false;

comment on column memory_items.name is
    'Seed 003 entry name, in any language (e.g. 用户偏好-简洁风格); null for extracted items.';
comment on column memory_items.description is 'Seed 003 entry description: when the entry is relevant.';
comment on column memory_items.entry_type is
    'Seed 003 type as the caller gave it (user, project, feedback, reference); kind holds the internal kind.';
comment on column memory_items.is_shared is
    'An agent''s entry that every agent of the namespace may read (seed 003 shared); false keeps it private.';
