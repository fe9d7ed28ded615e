DROP INDEX IF EXISTS workflows_unfinished_trigger_idx;
DROP TRIGGER IF EXISTS release_jobs_events ON release_jobs;
DROP TRIGGER IF EXISTS release_releases_events ON release_releases;
DROP FUNCTION IF EXISTS workflow_events_job();
DROP FUNCTION IF EXISTS workflow_events_release();
DROP TABLE IF EXISTS workflow_events;
