-- An extraction answer in llm_cache records the messages it covered ('<message_id>:<content_hash>'), so a
-- reprocess with an unchanged model and prompt version sends nothing for messages already answered, even
-- when it batches them differently from the runs that extracted them (a week extracted by several
-- incremental runs is one batch when reprocessed, whose cache key is new). Before, a window whose messages
-- gave no items (greetings, thanks) was sent again on every first reprocess: the window check saw no item
-- made by the configured model, and the batch's cache key had never been answered.
alter table llm_cache add column message_keys text[];

comment on column llm_cache.message_keys is 'Extraction answers: the messages the answered batch held, as message_id:content_hash (what a reprocess checks before sending a batch again); null for other stages.';
