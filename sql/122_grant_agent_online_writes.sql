-- Online writes (POST /v1/messages): an agent role may add conversation messages to the namespaces it is
-- granted, through the same staging path as the batch ingest. Row-level security (090) still binds every
-- row to those namespaces. Re-posting a message whose content changed rewrites it, as a re-ingest does, so
-- agents may also update message keys and delete the old L1 row of a rewritten message. Invalid records go to
-- quarantine under the key's namespace. Weekly partitions for the event times written are created by
-- ensure_message_partitions (security definer, 093); the event time is bounded by validation (1970-2200).
grant insert, update on message_keys to strataflow_agent;
grant insert, delete on conversation_messages to strataflow_agent;
grant insert on quarantine to strataflow_agent;
grant usage on sequence message_keys_message_id_seq, ingest_seq to strataflow_agent;
grant execute on function ensure_message_partitions(timestamptz, timestamptz) to strataflow_agent;
