-- Since two embedding models share the vector(384) columns (strataflow.llm.embeddings.model_for_text:
-- multilingual-e5-small for mostly-CJK text, all-MiniLM-L6-v2 for the rest), a row's vector is comparable only
-- with a query vector of the model named here. A change of either model is followed by
-- `strataflow embed --reembed`, which re-embeds the rows whose model is not the one their text gets now.
comment on column conversation_messages.embedding_model is
    'Model that made the embedding, chosen per text (CJK text: STRATAFLOW_EMBED_CJK_MODEL, else STRATAFLOW_EMBEDDING_MODEL); compare it only with a query vector of this model.';
comment on column memory_items.embedding_model is
    'Model that made the embedding, chosen per text (CJK text: STRATAFLOW_EMBED_CJK_MODEL, else STRATAFLOW_EMBEDDING_MODEL); compare it only with a query vector of this model.';
comment on column weekly_reports.embedding_model is
    'Model that made the embedding, chosen per text (CJK text: STRATAFLOW_EMBED_CJK_MODEL, else STRATAFLOW_EMBEDDING_MODEL); compare it only with a query vector of this model.';
comment on column insights.embedding_model is
    'Model that made the embedding, chosen per text (CJK text: STRATAFLOW_EMBED_CJK_MODEL, else STRATAFLOW_EMBEDDING_MODEL); compare it only with a query vector of this model.';
comment on column asset_chunks.embedding_model is
    'Model that made the embedding, chosen per text (CJK text: STRATAFLOW_EMBED_CJK_MODEL, else STRATAFLOW_EMBEDDING_MODEL); compare it only with a query vector of this model.';
comment on table embedding_cache is
    'Embedding cache: one row per (model, content_hash), so identical texts are embedded once per model and a rerun encodes nothing.';
