-- Two writers creating several weekly partitions each could deadlock: creating a partition locks the parent
-- table until the transaction ends, so a writer holding the parent (its first new week) and waiting for the
-- advisory lock of its next week met a writer holding that advisory lock and waiting for the parent. One
-- advisory lock for all partition creation, taken before the first create, orders them instead. The check
-- without the lock stays, so existing weeks cost no lock at all. Owner, search_path and grants are kept
-- (create or replace keeps them; 093 and 122).
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
            perform pg_advisory_xact_lock(hashtext('conversation_messages partitions'));
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
