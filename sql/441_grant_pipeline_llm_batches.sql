-- The pipeline group writes llm_batches (a table with no namespace, made after sql/091 granted the others
-- of its kind): a non-superuser pipeline login submits and collects batches, and `strataflow forget` removes
-- a forgotten subject's requests from them.
grant select, insert, update, delete on llm_batches to strataflow_pipeline;
