-- The base tables carry `comment on` like the views (sql/views/): what one row is, then every column, so
-- `\d+ pipeline_runs` in psql and the analyst guide (strataflow docs analyst-guide) explain them. Comments
-- only: no table, column or row changes. This file: operations, L1, access and bookkeeping tables; 231 the
-- memory (L2, L3) and asset tables. Columns commented by earlier files (121, 124, 180) keep their comments.

-- operations (002, 041)
comment on table pipeline_runs is
    'Runs: one row per flow or CLI stage run (nightly, weekly, backfill, assets, ingest, extract, ...), written by the run recorder.';
comment on column pipeline_runs.run_id is 'Id of the run; every row a run writes carries it as run_id (lineage).';
comment on column pipeline_runs.flow is 'The flow (nightly, weekly, backfill, assets) or CLI stage (ingest, extract, rollup, ...).';
comment on column pipeline_runs.namespace is 'Namespace the run was limited to; null when it spans every namespace.';
comment on column pipeline_runs.prefect_flow_run_id is 'Prefect flow run id when the run ran as a Prefect flow, else null.';
comment on column pipeline_runs.parameters is 'Parameters of the run as JSON (dates, namespace, reprocess, dry_run, ...).';
comment on column pipeline_runs.counts is 'What the run did, as JSON counts per stage (rows read, written, quarantined, LLM calls, ...).';
comment on column pipeline_runs.error is 'Error of a failed run (or the failed units of completed_with_errors), else null.';
comment on column pipeline_runs.started_at is 'When the run started (processing time).';
comment on column pipeline_runs.finished_at is 'When the run ended; null while running (or when killed).';

comment on table watermarks is
    'Progress: one row per (stage, namespace, scope) saying what the stage has done there, so a rerun does no work twice.';
comment on column watermarks.stage is 'The stage: ingest (per file or source) or an LLM stage (extract, hot_summary, ...) per subject.';
comment on column watermarks.namespace is 'Namespace of the scope.';
comment on column watermarks.scope is 'A subject_id, a source name or a file path, by stage.';
comment on column watermarks.position is 'Ingest sequence reached (conversation_messages.ingest_seq), for stages that follow ingest order.';
comment on column watermarks.checksum is 'Checksum of the file last ingested from this scope (file sources).';
comment on column watermarks.value is 'Anything else the stage needs to resume, as JSON (e.g. the last updated_at of a SQL source).';
comment on column watermarks.run_id is 'pipeline_runs.run_id of the run that moved the watermark last.';
comment on column watermarks.updated_at is 'When the watermark last moved.';

comment on table quarantine is
    'Quarantine: one row per input record that failed validation; the run goes on without it.';
comment on column quarantine.quarantine_id is 'Id of the quarantined record.';
comment on column quarantine.run_id is 'pipeline_runs.run_id of the run that read the record.';
comment on column quarantine.namespace is 'Namespace the record was read into; null when it had none.';
comment on column quarantine.subject_id is 'Subject the bad record names, when it names one (so forget finds it).';
comment on column quarantine.source is 'Source the record came from (input file base name, --source, service).';
comment on column quarantine.position is 'Where in the source: line number, row number or turn id.';
comment on column quarantine.field is 'The field the error names; null for a whole-record error.';
comment on column quarantine.reason is 'Short machine-readable reason (missing_field, bad_timestamp, ...).';
comment on column quarantine.error is 'The error as a sentence a person reads.';
comment on column quarantine.raw_record is 'The record as it was read.';
comment on column quarantine.created_at is 'When the record was quarantined.';

comment on table llm_calls is
    'LLM ledger: one row per request sent to a model (every retry and repair is its own row); cache hits send nothing and write no row.';
comment on column llm_calls.call_id is 'Id of the request.';
comment on column llm_calls.run_id is 'pipeline_runs.run_id of the run that sent it; null outside a run (the service).';
comment on column llm_calls.stage is 'The stage that sent it: extract (save_info too), rollup, reflect or hot_summary.';
comment on column llm_calls.namespace is 'Namespace the request was made for; null outside any namespace.';
comment on column llm_calls.subject_id is 'Subject the request was made for, when one.';
comment on column llm_calls.model is 'The model asked (litellm model name).';
comment on column llm_calls.prompt_version is 'Version of the prompt sent.';
comment on column llm_calls.input_hash is 'Hash of the prompt input: the key of llm_cache.';
comment on column llm_calls.attempt is 'Attempt number: 1 for the first request, more for retries and repairs.';
comment on column llm_calls.prompt_tokens is 'Prompt tokens the model reported.';
comment on column llm_calls.completion_tokens is 'Completion tokens the model reported.';
comment on column llm_calls.cost_usd is 'Cost in US dollars as litellm prices the model; null when it has no price (offline, local servers).';
comment on column llm_calls.latency_ms is 'Time to the answer in milliseconds.';
comment on column llm_calls.outcome is 'ok, invalid_output, rate_limited, server_error, timeout or error.';
comment on column llm_calls.error is 'Error text of a failed request, else null.';
comment on column llm_calls.created_at is 'When the request was sent.';

comment on table llm_cache is
    'LLM result cache: one row per validated answer (stage, prompt_version, model, input_hash), so the same work is never paid twice.';
comment on column llm_cache.stage is 'Stage that asked.';
comment on column llm_cache.prompt_version is 'Prompt version asked with.';
comment on column llm_cache.model is 'Model that answered.';
comment on column llm_cache.input_hash is 'Hash of the prompt input (llm_calls.input_hash).';
comment on column llm_cache.namespace is 'Namespace the answer was for (forget removes a subject''s answers).';
comment on column llm_cache.subject_id is 'Subject the answer was for, when one.';
comment on column llm_cache.response is 'The validated answer as JSON.';
comment on column llm_cache.created_at is 'When the answer was stored.';

comment on table deletion_reports is
    'Deletion reports: one row per expire, forget or asset replacement run (dry runs included); the deletions view reads it.';
comment on column deletion_reports.report_id is 'Id of the report.';
comment on column deletion_reports.run_id is 'pipeline_runs.run_id of the deleting run.';
comment on column deletion_reports.kind is 'expire (L1 past retention), forget (one subject erased) or asset_replace (old asset chunks).';
comment on column deletion_reports.namespace is 'Namespace the deletion covered; null when it spanned every namespace.';
comment on column deletion_reports.subject_id is 'Subject forgotten (forget), else null.';
comment on column deletion_reports.dry_run is 'True when nothing was deleted (counts say what would have been).';
comment on column deletion_reports.forced is 'True when expiry ran with --force past the rollup guard.';
comment on column deletion_reports.reason is 'Reason given by the operator, if any.';
comment on column deletion_reports.counts is 'Counts as the stage reported them (expire: total and by_namespace; forget: rows per table).';
comment on column deletion_reports.partitions_dropped is 'L1 partitions dropped whole.';
comment on column deletion_reports.oldest_event_at is 'Event time of the oldest deleted message.';
comment on column deletion_reports.newest_event_at is 'Event time of the newest deleted message.';
comment on column deletion_reports.archive_path is 'Parquet archive written before deletion (STRATAFLOW_ARCHIVE_EXPIRED), if any.';
comment on column deletion_reports.created_at is 'When the deletion ran.';

-- L1 (003)
comment on table message_keys is
    'Message identity: one row per L1 message ever ingested, unique per (namespace, source, source_message_id); it hands out message_id and stays after the text expires (lineage).';
comment on column message_keys.message_id is 'Id of the message: conversation_messages.message_id and the ids in every source_message_ids.';
comment on column message_keys.namespace is 'Project, agent or app the message belongs to.';
comment on column message_keys.source is 'Source of the message (input file base name, locomo:<id>, --source, the service).';
comment on column message_keys.source_message_id is 'The message id in its source.';
comment on column message_keys.subject_id is 'The user the message is about.';
comment on column message_keys.conversation_id is 'Conversation of the message.';
comment on column message_keys.event_at is 'When it was said (event time): where the row lives in conversation_messages.';
comment on column message_keys.content_hash is 'sha256 of the message content; a changed hash at re-ingest rewrites the message and re-queues it.';
comment on column message_keys.first_ingested_at is 'When the message was first ingested (processing time).';
comment on column message_keys.expired_at is 'When expiry (or forget) removed the L1 row; null while the text is in L1.';

comment on table conversation_messages is
    'L1 hot memory: one row per conversation message, verbatim, partitioned by event time (one partition per ISO week, UTC); kept for the retention period.';
comment on column conversation_messages.message_id is 'Id of the message (message_keys.message_id).';
comment on column conversation_messages.namespace is 'Project, agent or app the message belongs to.';
comment on column conversation_messages.subject_id is 'The user the message is about.';
comment on column conversation_messages.agent_id is 'The agent in the conversation, when the record names one.';
comment on column conversation_messages.conversation_id is 'Conversation (session) the message is part of.';
comment on column conversation_messages.source is 'Source of the message (input file base name, locomo:<id>, --source, the service).';
comment on column conversation_messages.source_message_id is 'The message id in its source.';
comment on column conversation_messages.role is 'user, assistant, system or tool.';
comment on column conversation_messages.content is 'The message text, verbatim.';
comment on column conversation_messages.content_hash is 'sha256 of content.';
comment on column conversation_messages.lang is 'Language of the content (en, zh), given or detected.';
comment on column conversation_messages.intent is 'Rule-based intent at ingest: greeting, request, question, decision, status_update, feedback, statement or other.';
comment on column conversation_messages.event_at is 'When it was said (event time, the partition key).';
comment on column conversation_messages.ingested_at is 'When it was first written (processing time).';
comment on column conversation_messages.updated_at is 'When the row last changed (a re-ingest with changed content, embedding).';
comment on column conversation_messages.expires_at is 'Event time + retention days; only the guarded expire step removes the row after it.';
comment on column conversation_messages.ingest_seq is 'Ingest sequence: extraction and rollup progress follow it (watermarks.position), never event time.';
comment on column conversation_messages.embedding is 'Embedding of content (null until embedded).';
comment on column conversation_messages.embedding_model is 'Model that made the embedding.';
comment on column conversation_messages.fts is 'Full-text vector: english over the text, simple over jieba tokens of its Chinese.';
comment on column conversation_messages.metadata is 'Extra fields of the input record as JSON (e.g. speaker).';
comment on column conversation_messages.run_id is 'pipeline_runs.run_id of the ingest that wrote the row.';

comment on table embedding_cache is
    'Embedding cache: one row per (model, content_hash), so identical texts are embedded once and a rerun encodes nothing.';
comment on column embedding_cache.model is 'Embedding model.';
comment on column embedding_cache.content_hash is 'sha256 of the embedded text.';
comment on column embedding_cache.embedding is 'The vector.';
comment on column embedding_cache.created_at is 'When it was encoded.';

-- access (090, 103, 121)
comment on table namespace_grants is
    'Namespace access: one row per (role, namespace) a login role may see; read only through strataflow_visible_namespaces(). Managed by strataflow access grant/revoke.';
comment on column namespace_grants.role_name is 'Name of the login role when granted.';
comment on column namespace_grants.namespace is 'The namespace the role may see (and, for agents, write memory in).';
comment on column namespace_grants.granted_at is 'When the grant was made.';
comment on column namespace_grants.role_oid is 'OID of the role: a grant counts only while a role with this OID and name exists.';
comment on column api_keys.key_id is 'Id of the key.';
comment on column api_keys.created_at is 'When the key was made (access create-key).';

-- bookkeeping (strataflow/db/migrations.py creates both before the first migration)
comment on table schema_migrations is
    'Applied migrations: one row per numbered file of sql/ with its checksum (an edited applied file is refused).';
comment on column schema_migrations.name is 'File name (NNN_verb_object.sql).';
comment on column schema_migrations.checksum is 'sha256 of the file as applied.';
comment on column schema_migrations.applied_at is 'When it was applied.';
comment on table schema_views is
    'Applied view files: one row per file of sql/views/ with the checksum last applied (db status shows changed files as pending).';
comment on column schema_views.name is 'View name (sql/views/NAME.sql).';
comment on column schema_views.checksum is 'sha256 of the file last applied.';
comment on column schema_views.state_hash is 'Hash of the view''s definition, options and comments as that file left them: a view changed since is applied again.';
comment on column schema_views.applied_at is 'When the file''s current content was first applied.';
