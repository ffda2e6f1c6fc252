-- Two writers creating the same weekly partition at once could both pass the to_regclass check (an
-- advisory lock does not refresh the catalog snapshot), and the second failed with duplicate_table.
-- Creating a partition that another transaction has just created is now a no-op.
create or replace function ensure_message_partitions(from_at timestamptz, to_at timestamptz) returns integer
language plpgsql security definer set search_path = public, pg_temp as $$
declare
    week_start timestamptz := date_trunc('week', from_at at time zone 'UTC') at time zone 'UTC';
    partition_name text;
    created integer := 0;
begin
    while week_start <= to_at loop
        partition_name := 'conversation_messages_w' || to_char(week_start at time zone 'UTC', 'IYYY"_"IW');
        if to_regclass(partition_name) is null then
            perform pg_advisory_xact_lock(hashtext(partition_name));
            begin
                execute format(
                    'create table %I partition of conversation_messages for values from (%L) to (%L)',
                    partition_name, week_start, week_start + interval '7 days');
                created := created + 1;
            exception when duplicate_table then
                null;  -- created by a concurrent writer in the meantime
            end;
        end if;
        week_start := week_start + interval '7 days';
    end loop;
    return created;
end;
$$;
