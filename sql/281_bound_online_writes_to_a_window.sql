-- Online writes (POST /v1/messages) stay inside a window of event time, and agent roles lose the two powers
-- 122 gave them beyond it: creating partitions for any week (one request of 500 weeks grew the database by
-- 200 MB and stalled other tenants) and deleting L1 rows (forget and expiry stay the pipeline's).
--
-- online_write_window: the window the API server accepts, [now - past_days, now + future_days], and how many
-- distinct weeks one request may span; the server sets it at start from its settings (owner connection).
-- ensure_online_message_partitions: the owner-run helper that creates the weekly partitions of an online
-- write, only for times inside that window (an hour of slack for clocks) and at most max_weeks of them.
-- remove_rewritten_messages: a re-posted message with new content drops its old L1 row; only rows whose key
-- no longer matches them (the caller re-keyed it first, under row-level security) can go.
create table online_write_window (
    singleton boolean primary key default true check (singleton),
    past_days integer not null default 30 check (past_days between 1 and 3650),
    future_days integer not null default 1 check (future_days between 0 and 30),
    max_weeks integer not null default 8 check (max_weeks between 1 and 600),
    updated_at timestamptz not null default now()
);
insert into online_write_window default values;
revoke all on online_write_window from public;

comment on table online_write_window is 'The event-time window of online writes (one row), set by the API server at start.';
comment on column online_write_window.past_days is 'Oldest accepted created_at, in days before now (STRATAFLOW_API_WRITE_PAST_DAYS or the retention).';
comment on column online_write_window.future_days is 'Newest accepted created_at, in days after now (STRATAFLOW_API_WRITE_FUTURE_DAYS).';
comment on column online_write_window.max_weeks is 'Distinct weeks one online write may span (STRATAFLOW_API_WRITE_MAX_WEEKS).';

create function ensure_online_message_partitions(event_times timestamptz[]) returns integer
language plpgsql security definer set search_path = public, pg_temp as $$
declare
    win online_write_window%rowtype;
    weeks timestamptz[];
    week timestamptz;
    created integer := 0;
begin
    select * into strict win from online_write_window;
    if exists (
        select 1 from unnest(event_times) as e
        where e < now() - make_interval(days => win.past_days, hours => 1)
            or e > now() + make_interval(days => win.future_days, hours => 1)
    ) then
        raise exception using errcode = '22023',
            message = format('created_at outside the online write window (%s days back, %s ahead)',
                             win.past_days, win.future_days);
    end if;
    select array_agg(distinct date_trunc('week', e at time zone 'UTC') at time zone 'UTC') into weeks
    from unnest(event_times) as e;
    if coalesce(cardinality(weeks), 0) > win.max_weeks then
        raise exception using errcode = '22023',
            message = format('created_at spans %s weeks; an online write may span at most %s',
                             cardinality(weeks), win.max_weeks);
    end if;
    foreach week in array coalesce(weeks, '{}') loop
        created := created + ensure_message_partitions(week, week);
    end loop;
    return created;
end;
$$;
revoke all on function ensure_online_message_partitions(timestamptz[]) from public;
grant execute on function ensure_online_message_partitions(timestamptz[]) to strataflow_agent, strataflow_pipeline;

create function remove_rewritten_messages(ids bigint[])
returns table (message_id bigint, ingested_at timestamptz)
language sql security definer set search_path = public, pg_temp as $$
    delete from conversation_messages as m
    using message_keys as k
    where k.message_id = any(ids) and m.message_id = k.message_id
        and (m.event_at <> k.event_at or m.content_hash is distinct from k.content_hash)
    returning m.message_id, m.ingested_at;
$$;
revoke all on function remove_rewritten_messages(bigint[]) from public;
grant execute on function remove_rewritten_messages(bigint[]) to strataflow_agent, strataflow_pipeline;

revoke execute on function ensure_message_partitions(timestamptz, timestamptz) from strataflow_agent;
revoke delete on conversation_messages from strataflow_agent;
