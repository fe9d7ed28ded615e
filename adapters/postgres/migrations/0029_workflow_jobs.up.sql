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

-- job.created and job.status changes of workflow jobs, as events_job
-- (migration 0024) records release jobs', with the workflow's id; a workflow
-- job's success sets no target's current release (ports.WorkflowJobChanges).
CREATE FUNCTION events_workflow_job() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO events_outbox (kind, workspace, object_id, at, data) VALUES ('job.created', NEW.workspace_id, NEW.id,
            (NEW.doc->>'updated_at')::timestamptz, jsonb_build_object('status', NEW.status, 'release_id', NEW.doc->>'release_id',
                'target_key', NEW.doc->>'target_key', 'workflow_id', NEW.workflow_id));
        RETURN NULL;
    END IF;
    IF NEW.status IS NOT DISTINCT FROM OLD.status THEN
        RETURN NULL;
    END IF;
    INSERT INTO events_outbox (kind, workspace, object_id, at, data) VALUES ('job.status', NEW.workspace_id, NEW.id,
        (NEW.doc->>'updated_at')::timestamptz, jsonb_build_object('status', NEW.status, 'previous', OLD.status,
            'release_id', NEW.doc->>'release_id', 'target_key', NEW.doc->>'target_key', 'workflow_id', NEW.workflow_id));
    RETURN NULL;
END $$;
CREATE TRIGGER workflow_jobs_changes AFTER INSERT OR UPDATE ON workflow_jobs
    FOR EACH ROW EXECUTE FUNCTION events_workflow_job();
