-- The two columns of online_write_window that sql/281 left without a comment (every base-table column carries
-- one: the analyst guide and the dbt sources are generated from them).
comment on column online_write_window.singleton is 'Always true: the table holds exactly one row.';
comment on column online_write_window.updated_at is 'When the API server last set the window (at its start).';
