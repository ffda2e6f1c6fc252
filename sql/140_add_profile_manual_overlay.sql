-- Seed 002 documents are typed (UserMemoryContent / WorkProfileContent, models/profiles.py) and read as the
-- subject's L2 items mapped onto the seed's fields plus the owner's manual edits. The edits live in their own
-- column, so extraction can rewrite the document without touching them and a read always applies them last.
-- The old flat documents ({key: {value, source, ...}}) do not fit the seed's models: they are emptied here and
-- rewritten at the next read or extraction (their manual fields were also written to L2 as manual items).
alter table profile_documents
    add column manual jsonb not null default '{}'::jsonb;

update profile_documents
set document = '{}'::jsonb, version = version + 1, updated_at = now()
where not document ? 'people' and not document ? 'team_members';

comment on column profile_documents.document is
    'Seed 002 content (UserMemoryContent or WorkProfileContent) as last written by extraction or an edit.';
comment on column profile_documents.manual is
    'Manual edits (PUT/PATCH): {"fields": {path: value}, "entries": {list: {name: entry}}, "removed": {list: {name: time}}}; they win over extraction.';
comment on column profile_documents.status is
    'ACTIVE or DISABLED (seed 002 MemoryStatus); a DISABLED document is left out of contexts and tool answers.';
