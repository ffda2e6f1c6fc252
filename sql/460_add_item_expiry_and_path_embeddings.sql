-- Two columns of memory_items for the LangGraph store's contract (strataflow.adapters.store, issue 47):
--
-- expires_at: when an item with a time to live (BaseStore.put(ttl=minutes)) stops existing. Every read of
-- memory items (strataflow.memory.api.READABLE, the retrieval's items layer) treats an item past it as gone at
-- once; the sweep (strataflow.adapters.store) then deletes it, versioned. Null: it never expires. Until now
-- the store kept it as epoch seconds in metadata.langgraph.expires_at and compared it in Python: those are
-- carried over here.
--
-- path_embeddings: one vector per indexed text of a store item whose value has several indexed fields
-- (LangGraph's `index={"fields": [...]}` or a put's `index=[...]`: one vector per field path, as
-- PostgresStore keeps them), all under the item's embedding model; the item's similarity to a query is the
-- best of them (strataflow.retrieval.layer_sql). Null for every other item (its one embedding is its
-- statement's). A write that changes the statement or the embedding model without giving new path vectors
-- clears them (the trigger below), so they never outlive the text or the model they were made from.

alter table memory_items add column expires_at timestamptz;
alter table memory_items add column path_embeddings vector[];

comment on column memory_items.expires_at is
'When the item stops existing for every read (a LangGraph store item''s time to live); null: never. The store''s next write batch deletes expired items (versioned).';
comment on column memory_items.path_embeddings is
'One vector per indexed text of a store item with several indexed fields (LangGraph''s per-path embedding), under embedding_model; the item''s similarity is the best of them. Null: the item has only its embedding.';

create index memory_items_expiry_idx on memory_items (namespace, expires_at) where expires_at is not null;

update memory_items set expires_at = to_timestamp(cast(metadata #>> '{langgraph,expires_at}' as float8))
where jsonb_typeof(metadata #> '{langgraph,expires_at}') = 'number';

create function strataflow_clear_stale_path_embeddings() returns trigger
language plpgsql as $$
begin
    if (new.statement is distinct from old.statement or new.embedding_model is distinct from old.embedding_model)
        and new.path_embeddings is not distinct from old.path_embeddings then
        new.path_embeddings := null;
    end if;
    return new;
end;
$$;

comment on function strataflow_clear_stale_path_embeddings() is
'Clears memory_items.path_embeddings when an update changes the statement or the embedding model without giving new ones.';

create trigger memory_items_stale_path_embeddings
before update of statement, embedding_model on memory_items
for each row when (old.path_embeddings is not null)
execute function strataflow_clear_stale_path_embeddings();
