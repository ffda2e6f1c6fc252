-- How far extraction has read a subject's messages, for the roles that may not read watermarks (agents and
-- analysts): the mem0-compatible API answers whether an `add(..., infer=True)` has been extracted yet (its
-- event turns SUCCEEDED once the extract stage's watermark of the subject has passed the messages' ingest_seq).
-- security definer, so the caller needs no grant on watermarks; it answers only for a namespace the calling
-- role may see: the row-level security rule, as strataflow_may_write_namespace (101) states it for every role
-- (a role given explicitly must be one the session's login role is a member of).
create function strataflow_extraction_position(
    p_namespace text, p_subject_id text, p_caller name default current_user
) returns bigint
language sql stable security definer set search_path = public, pg_temp as $$
    select w.position
    from watermarks as w
    where w.stage = 'extract' and w.namespace = p_namespace and w.scope = p_subject_id
        and strataflow_may_write_namespace(p_namespace, p_caller)
$$;
revoke all on function strataflow_extraction_position(text, text, name) from public;
grant execute on function strataflow_extraction_position(text, text, name)
to strataflow_pipeline, strataflow_agent, strataflow_analyst;

comment on function strataflow_extraction_position(text, text, name) is
'The ingest_seq up to which the extract stage has read the subject''s messages (its watermark), or null: for
callers that may see the namespace, e.g. select strataflow_extraction_position(''app'', ''u1'').';
