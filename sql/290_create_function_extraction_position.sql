-- How far extraction has read a subject's messages, for the roles that may not read watermarks (agents and
-- analysts): the mem0-compatible API answers whether an `add(..., infer=True)` has been extracted yet (its
-- event turns SUCCEEDED once the extract stage's watermark of the subject has passed the messages' ingest_seq).
-- security definer, so the caller needs no grant on watermarks; it answers only for a namespace the calling
-- role may see (a role given explicitly must be one the session's login role is a member of, as in 101).
create function strataflow_extraction_position(
    p_namespace text, p_subject_id text, p_caller name default current_user
) returns bigint
language sql stable security definer set search_path = public, pg_temp as $$
    select w.position
    from watermarks as w
    where w.stage = 'extract' and w.namespace = p_namespace and w.scope = p_subject_id
        and pg_has_role(session_user, p_caller, 'member')
        and (
            (select r.rolsuper from pg_roles as r where r.rolname = p_caller)
            or pg_has_role(p_caller, 'strataflow_pipeline', 'member')
            or p_namespace in (select strataflow_visible_namespaces(p_caller))
        )
$$;
revoke all on function strataflow_extraction_position(text, text, name) from public;
grant execute on function strataflow_extraction_position(text, text, name)
to strataflow_pipeline, strataflow_agent, strataflow_analyst;

comment on function strataflow_extraction_position(text, text, name) is
'The ingest_seq up to which the extract stage has read the subject''s messages (its watermark), or null: for
callers that may see the namespace, e.g. select strataflow_extraction_position(''app'', ''u1'').';
