-- Grants belong to a role, not to a name: a role dropped and created again under the same name used to find
-- its namesake's grants. namespace_grants now stores the role's OID, and a grant counts only while a role
-- with that OID and that name exists (an OID reused by another role does not match its name either).
-- Grants whose role no longer exists are removed here; `strataflow access create-role` clears a name's
-- leftover grants too.

alter table namespace_grants add column role_oid oid;

update namespace_grants as g set role_oid = r.oid
from pg_roles as r
where r.rolname = g.role_name;

delete from namespace_grants
where role_oid is null;

alter table namespace_grants alter column role_oid set not null;
alter table namespace_grants drop constraint namespace_grants_pkey;
alter table namespace_grants add primary key (role_oid, namespace);
create index namespace_grants_role_name_idx on namespace_grants (role_name);

-- Same signature as 090/092 (the policies call it): the namespaces of a live role, for a role the session's
-- login role is a member of.
create or replace function strataflow_visible_namespaces(role_name name) returns setof text
language sql stable security definer set search_path = public, pg_temp as $$
    select g.namespace
    from namespace_grants as g
    join pg_roles as r on r.oid = g.role_oid and r.rolname = g.role_name
    where r.rolname = $1
        and pg_has_role(session_user, r.oid, 'member')
$$;
