-- An API key belongs to the role it was made for, not to the role's name (as grants since 103): a role
-- dropped and created again under the same name does not inherit the old role's keys. Keys whose role no
-- longer exists stop working (their role_oid stays null and never matches).
alter table api_keys add column role_oid oid;

update api_keys as k set role_oid = r.oid
from pg_roles as r
where r.rolname = k.role_name;

comment on column api_keys.role_oid is 'OID of the role at create-key; the key works only while that role exists.';
