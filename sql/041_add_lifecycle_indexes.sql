-- Lifecycle lookups: the per-week input hashes of the scopes of a namespace (rollup catch-up, expiry guard)
-- read message_keys by namespace and event time; forget finds the Parquet archives that expiry wrote.
create index message_keys_namespace_event_idx on message_keys (namespace, event_at);
create index deletion_reports_archive_idx on deletion_reports (created_at) where archive_path is not null;
