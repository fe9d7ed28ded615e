CREATE OR REPLACE FUNCTION release_jobs_notify_takers() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('reconciler_jobs', NEW.job_agent_id);
    RETURN NULL;
END $$;

CREATE TRIGGER release_jobs_takers AFTER INSERT ON release_jobs
    FOR EACH ROW WHEN (NEW.status = 'pending') EXECUTE FUNCTION release_jobs_notify_takers();
