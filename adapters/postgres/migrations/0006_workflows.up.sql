-- Workflow instances (ports.WorkflowStore). doc is the whole record; the
-- columns beside it are the ones queries and compare-and-swap need.
CREATE TABLE workflows (
    id         text COLLATE "C" PRIMARY KEY,
    doc        jsonb NOT NULL,
    version    bigint NOT NULL
);

-- TaskRuns, one row each, written in batches under per-row versions.
CREATE TABLE workflow_task_runs (
    workflow_id text COLLATE "C" NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
    id          text COLLATE "C" NOT NULL,
    doc         jsonb NOT NULL,
    version     bigint NOT NULL,
    PRIMARY KEY (workflow_id, id)
);
