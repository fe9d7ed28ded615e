-- The jobs of workflow tasks that pull agents take (ports.WorkflowJobs):
-- one row per job (workflow, TaskRun, attempt), its document a ports.JobRow
-- with the workflow set; the columns are what takes and lists filter on.
CREATE TABLE workflow_jobs (
    id             text COLLATE "C" PRIMARY KEY,
    workflow_id    text COLLATE "C" NOT NULL,
    job_agent_id   text COLLATE "C" NOT NULL,
    status         text NOT NULL,
    active         boolean NOT NULL,
    deployment_id  text COLLATE "C" NOT NULL DEFAULT '',
    environment_id text COLLATE "C" NOT NULL DEFAULT '',
    resource_id    text COLLATE "C" NOT NULL DEFAULT '',
    version_id     text COLLATE "C" NOT NULL DEFAULT '',
    workspace_id   text COLLATE "C" NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL,
    version        bigint NOT NULL,
    doc            jsonb NOT NULL
);

CREATE INDEX workflow_jobs_take_idx ON workflow_jobs (job_agent_id, created_at, id) WHERE active;
CREATE INDEX workflow_jobs_newest_idx ON workflow_jobs (created_at DESC, id DESC);
