-- The workflows' report inboxes (ports.WorkflowStore.ReportsAdd): agents'
-- terminal reports are inserted here, locking no TaskRun, and the
-- workflow's next pass applies them and deletes them in its own write.
CREATE TABLE workflow_reports (
    seq         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workflow_id text COLLATE "C" NOT NULL REFERENCES workflows (id) ON DELETE CASCADE,
    doc         jsonb NOT NULL
);

CREATE INDEX workflow_reports_workflow_idx ON workflow_reports (workflow_id, seq);
