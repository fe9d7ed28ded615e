-- The release chain (ports.ReleaseStore). Catalog objects are JSON
-- documents (doc) with the columns queries filter on beside them; every
-- write is a compare-and-swap on version. Ids use COLLATE "C" so listings
-- are in byte order, as in the memory adapter.

CREATE TABLE release_workspaces (
    id          text        COLLATE "C" PRIMARY KEY,
    doc         jsonb       NOT NULL,
    version     bigint      NOT NULL CHECK (version > 0),
    updated_at  timestamptz NOT NULL
);

CREATE TABLE release_systems (
    id            text        COLLATE "C" PRIMARY KEY,
    workspace_id  text        COLLATE "C" NOT NULL,
    doc           jsonb       NOT NULL,
    version       bigint      NOT NULL CHECK (version > 0),
    updated_at    timestamptz NOT NULL
);
CREATE INDEX release_systems_workspace_idx ON release_systems (workspace_id, id);

CREATE TABLE release_deployments (
    id          text        COLLATE "C" PRIMARY KEY,
    system_id   text        COLLATE "C" NOT NULL,
    doc         jsonb       NOT NULL,
    version     bigint      NOT NULL CHECK (version > 0),
    updated_at  timestamptz NOT NULL
);
CREATE INDEX release_deployments_system_idx ON release_deployments (system_id, id);

CREATE TABLE release_environments (
    id          text        COLLATE "C" PRIMARY KEY,
    system_id   text        COLLATE "C" NOT NULL,
    doc         jsonb       NOT NULL,
    version     bigint      NOT NULL CHECK (version > 0),
    updated_at  timestamptz NOT NULL
);
CREATE INDEX release_environments_system_idx ON release_environments (system_id, id);

CREATE TABLE release_resources (
    id            text        COLLATE "C" PRIMARY KEY,
    workspace_id  text        COLLATE "C" NOT NULL,
    doc           jsonb       NOT NULL,
    version       bigint      NOT NULL CHECK (version > 0),
    updated_at    timestamptz NOT NULL
);
CREATE INDEX release_resources_workspace_idx ON release_resources (workspace_id, id);

CREATE TABLE release_job_agents (
    id          text        COLLATE "C" PRIMARY KEY,
    doc         jsonb       NOT NULL,
    version     bigint      NOT NULL CHECK (version > 0),
    updated_at  timestamptz NOT NULL
);

-- Policies list enabled-first by priority; doc is the policy's JSON.
CREATE TABLE release_policies (
    id          text        COLLATE "C" PRIMARY KEY,
    priority    integer     NOT NULL,
    enabled     boolean     NOT NULL,
    doc         jsonb       NOT NULL,
    version     bigint      NOT NULL CHECK (version > 0),
    updated_at  timestamptz NOT NULL
);
CREATE INDEX release_policies_list_idx ON release_policies (enabled, priority DESC, id);

-- Release targets, keyed by their key "deployment:environment:resource" so
-- listings page in key order; system_id is the deployment's system when the
-- target was stored. Each scope reads its own index in key order.
CREATE TABLE release_targets (
    key             text        COLLATE "C" PRIMARY KEY,
    deployment_id   text        COLLATE "C" NOT NULL,
    environment_id  text        COLLATE "C" NOT NULL,
    resource_id     text        COLLATE "C" NOT NULL,
    system_id       text        COLLATE "C" NOT NULL,
    created_at      timestamptz NOT NULL
);
CREATE INDEX release_targets_deployment_idx ON release_targets (deployment_id, key);
CREATE INDEX release_targets_environment_idx ON release_targets (environment_id, key);
CREATE INDEX release_targets_resource_idx ON release_targets (resource_id, key);
CREATE INDEX release_targets_system_idx ON release_targets (system_id, key);

-- Deployment versions stream newest first by keyset pages on
-- (created_at desc, id desc) from this index.
CREATE TABLE release_versions (
    id             text        COLLATE "C" PRIMARY KEY,
    deployment_id  text        COLLATE "C" NOT NULL,
    created_at     timestamptz NOT NULL,
    status         text        NOT NULL,
    doc            jsonb       NOT NULL
);
CREATE INDEX release_versions_stream_idx ON release_versions (deployment_id, created_at DESC, id DESC);

CREATE TABLE release_approvals (
    version_id      text        COLLATE "C" NOT NULL,
    environment_id  text        COLLATE "C" NOT NULL,
    user_name       text        COLLATE "C" NOT NULL,
    approved_at     timestamptz NOT NULL,
    PRIMARY KEY (version_id, environment_id, user_name)
);

CREATE TABLE release_policy_skips (
    id          text  COLLATE "C" PRIMARY KEY,
    version_id  text  COLLATE "C" NOT NULL,
    doc         jsonb NOT NULL
);
CREATE INDEX release_policy_skips_version_idx ON release_policy_skips (version_id, id);

-- Releases by content-hash id.
CREATE TABLE release_releases (
    id              text        COLLATE "C" PRIMARY KEY,
    target_key      text        COLLATE "C" NOT NULL,
    version_id      text        COLLATE "C" NOT NULL,
    doc             jsonb       NOT NULL,
    created_at      timestamptz NOT NULL
);

-- Each target's latest desired-release decision.
CREATE TABLE release_desired (
    target_key     text        COLLATE "C" PRIMARY KEY,
    release_id     text        COLLATE "C" NOT NULL DEFAULT '',
    reasons        jsonb       NOT NULL DEFAULT '[]',
    next_check_at  timestamptz,
    updated_at     timestamptz NOT NULL
);

-- Jobs. The target's ids and the release's version are copied from the
-- release at creation so every job query reads one table: history per
-- target, newest per target of a version (progression), of a resource
-- (dependency), active counts (concurrency) and external-id lookups.
CREATE TABLE release_jobs (
    id               text        COLLATE "C" PRIMARY KEY,
    idempotency_key  text        COLLATE "C" NOT NULL UNIQUE,
    release_id       text        COLLATE "C" NOT NULL,
    target_key       text        COLLATE "C" NOT NULL,
    deployment_id    text        COLLATE "C" NOT NULL,
    environment_id   text        COLLATE "C" NOT NULL,
    resource_id      text        COLLATE "C" NOT NULL,
    version_id       text        COLLATE "C" NOT NULL,
    job_agent_id     text        COLLATE "C" NOT NULL DEFAULT '',
    external_id      text        COLLATE "C" NOT NULL DEFAULT '',
    status           text        NOT NULL,
    active           boolean     NOT NULL,
    created_at       timestamptz NOT NULL,
    doc              jsonb       NOT NULL,
    version          bigint      NOT NULL CHECK (version > 0),
    updated_at       timestamptz NOT NULL
);
-- History per target, newest first; also the newest per target of a
-- deployment or an environment (DISTINCT ON target_key).
CREATE INDEX release_jobs_target_idx ON release_jobs (deployment_id, target_key, created_at DESC, id DESC);
-- Newest per target of a version (environment progression).
CREATE INDEX release_jobs_version_idx ON release_jobs (version_id, target_key, created_at DESC, id DESC);
-- Newest per target on a resource (deployment dependency).
CREATE INDEX release_jobs_resource_idx ON release_jobs (resource_id, target_key, created_at DESC, id DESC);
-- Active jobs per target and per environment (concurrency).
CREATE INDEX release_jobs_active_idx ON release_jobs (deployment_id, environment_id, target_key) WHERE active;
CREATE INDEX release_jobs_external_idx ON release_jobs (job_agent_id, external_id) WHERE external_id <> '';
