-- Pull agents' takes (ports.JobTaker): an agent's active jobs, oldest
-- first, and a notification on the jobs channel when a pending job is
-- inserted, so the takers waiting in every process look at once.
CREATE INDEX release_jobs_agent_active_idx ON release_jobs (job_agent_id, created_at, id) WHERE active;

CREATE FUNCTION release_jobs_notify_takers() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('reconciler_jobs', NEW.job_agent_id);
    RETURN NULL;
END $$;

CREATE TRIGGER release_jobs_takers AFTER INSERT ON release_jobs
    FOR EACH ROW WHEN (NEW.status = 'pending') EXECUTE FUNCTION release_jobs_notify_takers();
