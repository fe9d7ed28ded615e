DROP INDEX IF EXISTS release_jobs_agent_created_idx;
DROP INDEX IF EXISTS release_jobs_created_idx;
