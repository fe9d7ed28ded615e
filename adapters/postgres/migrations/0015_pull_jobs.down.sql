DROP TRIGGER IF EXISTS release_jobs_takers ON release_jobs;
DROP FUNCTION IF EXISTS release_jobs_notify_takers();
DROP INDEX IF EXISTS release_jobs_agent_active_idx;
