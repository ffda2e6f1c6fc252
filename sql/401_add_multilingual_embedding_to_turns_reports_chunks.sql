-- One multilingual space for every row (issue 44), after L2 items (sql/400): an L1 turn, an L3 weekly report
-- or an asset chunk whose own embedding is not under the multilingual model (settings.embed_cjk_model,
-- multilingual-e5-small: an English row's is MiniLM's) gets a second vector under it, so a question in the
-- other language meets it there; a Chinese row's own vector is already multilingual and its embedding_multi
-- stays null. Search compares a question and a row of different languages in that space, under the
-- cross-language calibration (strataflow.retrieval.layer_sql, ranking.py), as for items.
--
-- Written with the row's own embedding by the embed stage (strataflow.pipeline.embed: turns and reports are
-- embedded there) and by the asset ingest (strataflow.pipeline.assets); `strataflow embed` fills it for older
-- rows (strataflow.pipeline.embed_multi), page by page, while search compares a row without one in its own
-- space. A turn or a chunk whose text changes is a new row (ingest and asset ingest delete and insert); a
-- rewritten report clears both vectors (strataflow.memory.reports). embedding_multi_model names the model,
-- so a change of the multilingual model makes the vector pending again.
--
-- The wide (approximate) search reaches rows in the multilingual space through an HNSW index on each searched
-- table's embedding_multi (memory_items' too): a Chinese question meets English rows there (a Chinese row is
-- reached through its own embedding's index, under the question's multilingual vector). Null vectors are not
-- indexed: on a table of rows not yet backfilled the index is built empty and grows as `strataflow embed`
-- fills it.

alter table conversation_messages add column embedding_multi vector(384);
alter table conversation_messages add column embedding_multi_model text;
alter table weekly_reports add column embedding_multi vector(384);
alter table weekly_reports add column embedding_multi_model text;
alter table asset_chunks add column embedding_multi vector(384);
alter table asset_chunks add column embedding_multi_model text;

comment on column conversation_messages.embedding_multi is
'The message''s content embedded by the multilingual model (embedding_multi_model) when its embedding is under another model: compared with a question in the other language. Null: not yet embedded, or the message''s own embedding is multilingual.';
comment on column conversation_messages.embedding_multi_model is
'Model that made embedding_multi.';
comment on column weekly_reports.embedding_multi is
'The report''s summary embedded by the multilingual model (embedding_multi_model) when its embedding is under another model: compared with a question in the other language. Null: not yet embedded, or the report''s own embedding is multilingual.';
comment on column weekly_reports.embedding_multi_model is
'Model that made embedding_multi.';
comment on column asset_chunks.embedding_multi is
'The chunk''s content embedded by the multilingual model (embedding_multi_model) when its embedding is under another model: compared with a question in the other language. Null: not yet embedded, or the chunk''s own embedding is multilingual.';
comment on column asset_chunks.embedding_multi_model is
'Model that made embedding_multi.';

-- Each searched table's multilingual vectors, for the wide search's nearest rows.
create index conversation_messages_multi_embedding_idx on conversation_messages
    using hnsw (embedding_multi vector_cosine_ops);
create index memory_items_multi_embedding_idx on memory_items using hnsw (embedding_multi vector_cosine_ops);
create index weekly_reports_multi_embedding_idx on weekly_reports using hnsw (embedding_multi vector_cosine_ops);
create index asset_chunks_multi_embedding_idx on asset_chunks using hnsw (embedding_multi vector_cosine_ops);
-- The turns `strataflow embed` may still give a multilingual vector, in ingest order (its keyset).
create index conversation_messages_multi_pending_idx on conversation_messages (ingest_seq)
    where embedding_multi is null and embedding is not null;
