-- API keys of the agent service (strataflow api / strataflow mcp): each key is bound to one login role of the
-- agent or analyst group, and every request runs its transaction as that role, so the namespace policies of
-- 090 apply. Only a SHA-256 hash of the key is stored, with a visible prefix to find it; the key itself is
-- printed once by `strataflow access create-key`. No group may read this table (it has no namespace column,
-- so strataflow_apply_namespace_security() grants nothing on it); only the service's owner connection does.
create table api_keys (
    key_id bigint generated always as identity primary key,
    name text not null,
    prefix text not null unique,
    key_hash text not null,
    role_name text not null,
    created_at timestamptz not null default now(),
    expires_at timestamptz,
    revoked_at timestamptz,
    last_used_at timestamptz
);
create unique index api_keys_active_name_idx on api_keys (name) where revoked_at is null;
revoke all on api_keys from public;

comment on table api_keys is 'Service API keys: one row per key, bound to a database role; the key itself is never stored.';
comment on column api_keys.name is 'Name given at create-key; unique among keys not revoked.';
comment on column api_keys.prefix is 'The visible start of the key (sf_ + 8 hex), used to find its row.';
comment on column api_keys.key_hash is 'sha256 hex digest of the whole key.';
comment on column api_keys.role_name is 'Login role every request with this key runs as (agent or analyst group).';
comment on column api_keys.expires_at is 'After this time the key is refused (401); null: no expiry.';
comment on column api_keys.revoked_at is 'When access revoke-key was run; a revoked key is refused (401).';
comment on column api_keys.last_used_at is 'Last accepted request (updated at most once a minute per server process).';
