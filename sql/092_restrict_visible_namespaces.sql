-- strataflow_visible_namespaces(role) answered for any role name, so an agent could list the namespaces
-- granted to another role (names only, no rows). Now it answers only for a role the session's login role
-- is a member of: the login role itself (what the policies pass as current_user), or any role for a
-- superuser session that switched with `set role` (strataflow.access.as_role). The signature is unchanged,
-- so the policies of 090 keep using it.
create or replace function strataflow_visible_namespaces(role_name name) returns setof text
language sql stable security definer set search_path = public, pg_temp as $$
    select g.namespace
    from namespace_grants as g
    where g.role_name = $1
        and case when exists (select 1 from pg_roles as r where r.rolname = $1)
                 then pg_has_role(session_user, $1, 'member') else false end
$$;
