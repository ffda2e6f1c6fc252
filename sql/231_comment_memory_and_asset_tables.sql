-- The memory (L2, L3) and asset tables carry `comment on` like the views (sql/views/), as 230 does for the
-- other tables: what one row is, then every column. Comments only: no table, column or row changes. Columns
-- commented by earlier files (095, 120, 140, 141, 200) keep their comments.

-- L2 (004, 095, 120, 141, 200)
comment on table memory_items is
    'L2 warm memory: one current row per item (namespace, subject_id, agent_id, kind, key); every change adds a row to memory_item_versions. Read the memories view for the active ones.';
comment on column memory_items.item_id is 'Stable id of the item; the key of memory_item_versions, lineage and insights evidence.';
comment on column memory_items.namespace is 'Project, agent or app the memory belongs to.';
comment on column memory_items.subject_id is 'The user the memory is about.';
comment on column memory_items.agent_id is 'Agent that owns the item (seed 003 agent scope); null when it belongs to the whole namespace.';
comment on column memory_items.kind is 'fact, preference, intent, meta, status, decision, feedback, reference, observation, or the internal hot_summary.';
comment on column memory_items.key is 'snake_case attribute name; profile keys come from a closed vocabulary.';
comment on column memory_items.value is 'The value as JSON (numbers stay numbers; ranges such as "30+" stay strings).';
comment on column memory_items.statement is 'The statement in the user''s own words.';
comment on column memory_items.category is 'Seed 000 category (basic, career, immigration, family, ...), when known.';
comment on column memory_items.importance is 'Importance 0-100 (fact 70, preference 60, intent 80 by default).';
comment on column memory_items.confidence is 'Confidence 0-1 of the current value (1 for manual edits).';
comment on column memory_items.status is 'active or deleted (a delete is versioned, never a row removal).';
comment on column memory_items.source is 'extracted (by the pipeline) or manual (written by a person or agent; extraction never silently overwrites it).';
comment on column memory_items.version is 'Current version number (memory_item_versions.version).';
comment on column memory_items.valid_from is 'Event time of the statement that made the current value true (valid time).';
comment on column memory_items.recorded_at is 'When the current value was recorded (processing time).';
comment on column memory_items.updated_at is 'When the row last changed.';
comment on column memory_items.reflected_version is 'The version insight reflection last saw; pending reflection while it differs from version.';
comment on column memory_items.embedding is 'Embedding of the statement (null until embedded).';
comment on column memory_items.embedding_model is 'Model that made the embedding.';
comment on column memory_items.fts is 'Full-text vector: english over the text, simple over jieba tokens of its Chinese.';
comment on column memory_items.source_message_ids is 'L1 message ids (message_keys.message_id) the current value came from.';
comment on column memory_items.metadata is 'Extra fields as JSON (approximate: true for an approximate number, keys, via, ...).';
comment on column memory_items.run_id is 'pipeline_runs.run_id of the run that wrote the current version.';
comment on column memory_items.prompt_version is 'Extraction prompt version of the current version (null for manual edits).';
comment on column memory_items.model is 'Model that extracted the current version (null for manual edits).';

comment on table memory_item_versions is
    'L2 history: one row per version of an item, bi-temporal (valid_from/valid_to: true in the world; recorded_at/superseded_at: known to us). Written only through the store''s functions; memory_as_of() reads it.';
comment on column memory_item_versions.version_id is 'Id of the history row.';
comment on column memory_item_versions.item_id is 'memory_items.item_id of the item (in the same namespace).';
comment on column memory_item_versions.namespace is 'Namespace of the item.';
comment on column memory_item_versions.subject_id is 'Subject of the item.';
comment on column memory_item_versions.kind is 'Kind of the item as of this version.';
comment on column memory_item_versions.key is 'Key of the item as of this version.';
comment on column memory_item_versions.version is 'Version number within the item.';
comment on column memory_item_versions.action is 'new, content_modified (the value changed), modified (other fields changed) or deleted.';
comment on column memory_item_versions.value is 'The value as of this version.';
comment on column memory_item_versions.statement is 'The statement as of this version.';
comment on column memory_item_versions.category is 'The category as of this version.';
comment on column memory_item_versions.importance is 'Importance 0-100 as of this version.';
comment on column memory_item_versions.confidence is 'Confidence 0-1 as of this version.';
comment on column memory_item_versions.status is 'active or deleted as of this version.';
comment on column memory_item_versions.source is 'extracted or manual.';
comment on column memory_item_versions.valid_from is 'Since when the value was true (event time).';
comment on column memory_item_versions.valid_to is 'Until when it was true; null while it still holds.';
comment on column memory_item_versions.recorded_at is 'When we recorded it (processing time).';
comment on column memory_item_versions.superseded_at is 'When a later version closed it; null while current.';
comment on column memory_item_versions.source_message_ids is 'L1 message ids this version came from.';
comment on column memory_item_versions.run_id is 'pipeline_runs.run_id of the run that wrote this version.';
comment on column memory_item_versions.prompt_version is 'Prompt version that produced it (null for manual edits).';
comment on column memory_item_versions.model is 'Model that produced it (null for manual edits).';
comment on column memory_item_versions.note is 'Why a history-only row exists (e.g. an extracted value kept out of a manual item), else null.';

comment on table profile_documents is
    'Seed 002 profiles: one row per (namespace, subject_id, doc_type), the user or work document of a subject.';
comment on column profile_documents.profile_id is 'Id of the document.';
comment on column profile_documents.namespace is 'Namespace of the subject.';
comment on column profile_documents.subject_id is 'The owner (the user the document describes).';
comment on column profile_documents.doc_type is 'user (UserMemoryContent) or work (WorkProfileContent).';
comment on column profile_documents.version is 'Version number, + 1 on every write.';
comment on column profile_documents.created_at is 'When the document was first written.';
comment on column profile_documents.updated_at is 'When it last changed.';

-- L3 and long-term assets (005, 200)
comment on table weekly_reports is
    'L3 weekly reports: one current row per (namespace, subject_id, week_start); earlier revisions are in weekly_report_revisions.';
comment on column weekly_reports.report_id is 'Id of the report.';
comment on column weekly_reports.namespace is 'Project, agent or app the report belongs to.';
comment on column weekly_reports.subject_id is 'The user (or scope) the report is about.';
comment on column weekly_reports.week_start is 'ISO week Monday, in STRATAFLOW_TIMEZONE.';
comment on column weekly_reports.week_end is 'Last day (Sunday) of the ISO week.';
comment on column weekly_reports.summary is 'The week''s summary (Markdown).';
comment on column weekly_reports.key_events is 'Key events as JSON: [{event, message_ids}].';
comment on column weekly_reports.metrics is 'Week metrics as JSON (message counts, intents, ...).';
comment on column weekly_reports.input_hash is 'Hash of the week''s inputs: unchanged inputs rewrite nothing.';
comment on column weekly_reports.source_message_ids is 'L1 message ids of the week.';
comment on column weekly_reports.embedding is 'Embedding of the summary (null until embedded).';
comment on column weekly_reports.embedding_model is 'Model that made the embedding.';
comment on column weekly_reports.fts is 'Full-text vector of the summary: english, and simple over jieba tokens of its Chinese.';
comment on column weekly_reports.run_id is 'pipeline_runs.run_id of the rollup run that wrote it.';
comment on column weekly_reports.prompt_version is 'Rollup prompt version.';
comment on column weekly_reports.model is 'Model that wrote the summary.';
comment on column weekly_reports.created_at is 'When the report was first written.';
comment on column weekly_reports.updated_at is 'When it last changed (a late backfill or a reprocess rewrites its week).';
comment on column weekly_report_revisions.revision_id is 'Id of the revision row (earlier revisions of weekly_reports, sql/200).';

comment on table insights is
    'Reflected insights: one row per insight (namespace, subject_id, key) and period; the current one has valid_to null (current_insights view).';
comment on column insights.insight_id is 'Id of the insight.';
comment on column insights.namespace is 'Project, agent or app the insight belongs to.';
comment on column insights.subject_id is 'The user the insight is about.';
comment on column insights.key is 'The attribute the insight answers, e.g. occupation.';
comment on column insights.question is 'The question it answers, e.g. What is the user''s occupation?';
comment on column insights.statement is 'The reflected answer.';
comment on column insights.confidence is 'Confidence 0-1 given by reflection.';
comment on column insights.evidence_item_ids is 'memory_items.item_id values cited as evidence.';
comment on column insights.evidence_message_ids is 'L1 message ids cited as evidence.';
comment on column insights.valid_from is 'Since when the insight holds (event time).';
comment on column insights.valid_to is 'Until when it held; null while current.';
comment on column insights.recorded_at is 'When reflection recorded it (processing time).';
comment on column insights.superseded_at is 'When a newer insight replaced it; null while current.';
comment on column insights.embedding is 'Embedding of the statement (null until embedded).';
comment on column insights.embedding_model is 'Model that made the embedding.';
comment on column insights.run_id is 'pipeline_runs.run_id of the reflection run.';
comment on column insights.prompt_version is 'Reflection prompt version.';
comment on column insights.model is 'Model that reflected it.';

comment on table asset_documents is
    'Long-term assets: one row per data asset (namespace, uri): a document, a CSV/Parquet table or a SQL extract.';
comment on column asset_documents.document_id is 'Id of the asset.';
comment on column asset_documents.namespace is 'Namespace the asset belongs to (assets have no subject).';
comment on column asset_documents.uri is 'Where the asset came from (file path, sql:<source>#table=... or #query=...).';
comment on column asset_documents.kind is 'markdown, text, csv, parquet, json or sql.';
comment on column asset_documents.title is 'Title, when the asset has one.';
comment on column asset_documents.checksum is 'Checksum of the content: an unchanged asset is not re-ingested.';
comment on column asset_documents.version is 'Version number, + 1 each time the asset is re-ingested with new content.';
comment on column asset_documents.metadata is 'Extra fields of the asset as JSON, as its reader found them.';
comment on column asset_documents.run_id is 'pipeline_runs.run_id of the ingest that wrote it.';
comment on column asset_documents.ingested_at is 'When the asset was first ingested.';
comment on column asset_documents.updated_at is 'When it was last re-ingested.';

comment on table asset_chunks is
    'Long-term memory: one row per chunk of a data asset (document_id, chunk_index), embedded for search.';
comment on column asset_chunks.chunk_id is 'Id of the chunk.';
comment on column asset_chunks.document_id is 'asset_documents.document_id of its asset.';
comment on column asset_chunks.namespace is 'Namespace of its asset.';
comment on column asset_chunks.chunk_index is 'Position of the chunk in its asset, from 0.';
comment on column asset_chunks.content is 'The chunk text.';
comment on column asset_chunks.content_hash is 'sha256 of content.';
comment on column asset_chunks.token_count is 'Tokens in content.';
comment on column asset_chunks.lang is 'Language of the content (en, zh).';
comment on column asset_chunks.embedding is 'Embedding of content (null until embedded).';
comment on column asset_chunks.embedding_model is 'Model that made the embedding.';
comment on column asset_chunks.fts is 'Full-text vector: english over the text, simple over jieba tokens of its Chinese.';
comment on column asset_chunks.metadata is 'Extra fields of the chunk as JSON, as the chunker wrote them.';
