-- One agent or analyst login holds at most 20 sessions at once (strataflow.db.roles.ROLE_CONNECTIONS gives new
-- roles the same): a BI tool that leaks connections, or a role whose password leaked, cannot take the
-- server's connections from the pipeline, the API (which logs in as the owner) and the other roles. A role
-- already given a limit keeps it; a role this login may not alter is left as it is, with a notice.

do $$
declare
    login name;
begin
    for login in
        select r.rolname from pg_roles as r
        join pg_auth_members as m on m.member = r.oid
        join pg_roles as g on g.oid = m.roleid
        where g.rolname in ('strataflow_agent', 'strataflow_analyst') and r.rolcanlogin and r.rolconnlimit = -1
    loop
        begin
            execute format('alter role %I connection limit 20', login);
        exception when insufficient_privilege then
            raise notice 'role % keeps no connection limit: this login may not alter it', login;
        end;
    end loop;
end;
$$;
