-- The one agent-visibility rule of L2 memory items (seed 003 agent scope; issue 27 item 2). An item is
-- visible to a viewer agent when it has no agent (it belongs to the whole namespace), when its agent shared
-- it, or when it is the viewer's own. A viewer with no agent (null) sees no agent's private items: the
-- namespace's items and shared ones only. Every reader of memory_items for an agent or a user (the memory
-- API, retrieval, the context builder, get_user_context, summarize, the profile documents, extraction's
-- existing keys, reflection) filters with this function, so the rule is written once.
-- A plain SQL expression, immutable: the planner inlines it, so a call costs what the expression costs and
-- the indexes of memory_items serve it as before.
create function strataflow_item_visible(item_agent_id text, item_is_shared boolean, viewer_agent_id text)
returns boolean
language sql immutable parallel safe as $$
    select item_agent_id is null or coalesce(item_is_shared, false)
        or coalesce(item_agent_id = viewer_agent_id, false)
$$;

comment on function strataflow_item_visible(text, boolean, text) is
'Whether an L2 memory item (its agent_id, is_shared) is visible to the viewer agent: it has no agent, it is
shared, or it is the viewer''s own; a null viewer (a request without an agent) sees no agent''s private items.
The one agent-visibility rule: every reader of memory_items for an agent or a user filters with it, e.g.
where strataflow_item_visible(agent_id, is_shared, ''agent_a'').';
