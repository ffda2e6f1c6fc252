{#
  The grain test every mart carries: no two rows share the values of `columns` (nulls count as equal, as
  GROUP BY treats them, unlike a `unique` test on a concatenation). Fails with the duplicated keys.
#}
{% test unique_grain(model, columns) %}
    select {{ columns | join(', ') }}, count(*) as rows_sharing_the_grain
    from {{ model }}
    group by {{ columns | join(', ') }}
    having count(*) > 1
{% endtest %}
