-- A non-superuser pipeline login (strataflow_pipeline member on an external server) must be able to ingest:
-- ingest creates weekly partitions of conversation_messages, which only the table owner may do. The function
-- now runs as its owner (security definer, fixed search_path) and only the pipeline group may call it, so
-- agents and analysts cannot create partitions. Partitions stay owned by the owner, with no privilege for
-- any group (090: a partition queried directly would skip its parent's policy).
alter function ensure_message_partitions(timestamptz, timestamptz)
    security definer set search_path = public, pg_temp;
revoke all on function ensure_message_partitions(timestamptz, timestamptz) from public;
grant execute on function ensure_message_partitions(timestamptz, timestamptz) to strataflow_pipeline;
