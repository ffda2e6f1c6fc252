-- One multilingual space for L2 items (issue 44): an item whose own embedding is not under the multilingual
-- model (settings.embed_cjk_model, multilingual-e5-small: an English item's is MiniLM's) gets a second vector
-- under it, so a question in the other language meets it there (a Chinese question about an English fact;
-- an English question about a Chinese fact meets the Chinese item's own vector, already multilingual). Search
-- compares a question with an item in the multilingual space when their languages differ, under the
-- cross-language calibration (strataflow.retrieval.ranking, fitted by bench.fit_ranking).
--
-- Written when the item is written (strataflow.memory.store, encoded before the transaction for batches);
-- `strataflow embed --reembed` fills it for older items. A write that changes the statement without giving
-- a new one clears it (the trigger below), so it never outlives its text. embedding_multi_model names the
-- model, so a change of the multilingual model makes the vector pending again.

alter table memory_items add column embedding_multi vector(384);
alter table memory_items add column embedding_multi_model text;

comment on column memory_items.embedding_multi is
'The item''s text embedded by the multilingual model (embedding_multi_model) when its embedding is under another model: compared with a question in the other language. Null: not yet embedded, or the item''s own embedding is multilingual.';
comment on column memory_items.embedding_multi_model is
'Model that made embedding_multi.';

create function strataflow_clear_stale_multi_embedding() returns trigger
language plpgsql as $$
begin
    if new.statement is distinct from old.statement
        and new.embedding_multi is not distinct from old.embedding_multi then
        new.embedding_multi := null;
        new.embedding_multi_model := null;
    end if;
    return new;
end;
$$;

comment on function strataflow_clear_stale_multi_embedding() is
'Clears memory_items.embedding_multi when an update changes the statement without giving a new one.';

create trigger memory_items_stale_multi_embedding
before update of statement on memory_items
for each row when (old.embedding_multi is not null)
execute function strataflow_clear_stale_multi_embedding();
