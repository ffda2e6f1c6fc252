{#
  Row-level security on a mart: every mart has a namespace column, and a reader sees the rows of the
  namespaces granted to its login role (`strataflow access grant ROLE --namespace NS`), as in the views of
  schema public. The pipeline and the dbt group see every namespace; the owner (strataflow_dbt) is not
  bound by its own table's policies.
#}
{% macro secure_mart() %}
    alter table {{ this }} enable row level security;
    drop policy if exists namespace_read on {{ this }};
    create policy namespace_read on {{ this }} for select using (
        pg_has_role(current_user, 'strataflow_pipeline', 'member')
        or pg_has_role(current_user, 'strataflow_transform', 'member')
        or namespace in (select public.strataflow_visible_namespaces(current_user))
    )
{% endmacro %}
