-- Keys by event time (rollup's week inputs, the ops report, a windowed probe of a namespace) are read through
-- a BRIN index on event_at instead of a b-tree on (namespace, event_at). Keys arrive roughly in event-time
-- order (a file, a backfill, the service), so each block range of the table covers a short stretch of time
-- and a week's keys are found by reading that week's blocks, with the namespace filtered there. The b-tree
-- cost every key insert a descent (0.25 s of server CPU per 200k-row bulk ingest, about a sixth of the key
-- insert); the BRIN index costs next to nothing to maintain. Lookups by namespace alone, and by scope, keep
-- message_keys_scope_idx (namespace, subject_id). New block ranges are summarized by autovacuum
-- (autosummarize); until then a query reads them, which is correct, only slower.
drop index message_keys_namespace_event_idx;
create index message_keys_event_brin on message_keys using brin (event_at) with (autosummarize = on);
