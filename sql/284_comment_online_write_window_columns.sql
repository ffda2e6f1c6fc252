-- The two columns of online_write_window that 281 left without a comment (every column carries one: the
-- analyst guide and the dbt sources are generated from them).
comment on column online_write_window.singleton is 'Always true: the primary key that keeps the table at one row.';
comment on column online_write_window.updated_at is 'When the API server last set the window (at its start).';
