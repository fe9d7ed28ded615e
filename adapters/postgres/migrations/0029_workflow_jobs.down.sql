DROP TABLE IF EXISTS workflow_jobs;
DROP FUNCTION IF EXISTS events_workflow_job();
