-- A run whose process died (killed, out of memory, the machine restarted) used to stay 'running' forever.
-- Each run now records the host and process that run it; the next run of the same flow on that host marks
-- such a run 'crashed' when its process is gone (strataflow.pipeline.runs.start_run). A crashed run did
-- some of its work: the watermarks say how far, and the next run resumes from them.
--
-- Re-running an ingest that was killed half-way reads its files again: a bad record it had quarantined is
-- now quarantined once (one row per namespace, source, position and record text).
alter table pipeline_runs
add column host text,
add column pid integer,
add column process_started_at timestamptz;

alter table pipeline_runs drop constraint pipeline_runs_status_check;
alter table pipeline_runs add constraint pipeline_runs_status_check check (
    status in ('running', 'completed', 'completed_with_errors', 'failed', 'budget_stopped', 'crashed')
);

comment on column pipeline_runs.status is 'running, completed, completed_with_errors (some LLM units failed, the rest done), failed, budget_stopped (clean stop at the LLM budget; the next run resumes), or crashed (its process died; marked by the next run of the flow).';
comment on column pipeline_runs.host is 'Host name of the process that ran it.';
comment on column pipeline_runs.pid is 'Process id that ran it (with process_started_at: a crashed run is one whose process is gone).';
comment on column pipeline_runs.process_started_at is 'Start time of that process (a reused process id is not the same process).';

delete from quarantine as q
using quarantine as d
where
    q.quarantine_id > d.quarantine_id
    and coalesce(q.namespace, '') = coalesce(d.namespace, '')
    and q.source = d.source
    and q.position = d.position
    and md5(q.raw_record) = md5(d.raw_record);

create unique index quarantine_record_idx on quarantine (
    (coalesce(namespace, '')), source, position, (md5(raw_record))
);

-- An agent's online write quarantines its bad records under the same rule (insert ... on conflict do
-- nothing), which reads the key's columns of its own namespace's rows (row-level security still binds it).
grant select (namespace, source, position, raw_record) on quarantine to strataflow_agent;
