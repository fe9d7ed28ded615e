DROP TRIGGER IF EXISTS release_desired_changes_update ON release_desired;
DROP TRIGGER IF EXISTS release_desired_changes_insert ON release_desired;
DROP TRIGGER IF EXISTS release_jobs_changes_update ON release_jobs;
DROP TRIGGER IF EXISTS release_jobs_changes_insert ON release_jobs;
DROP FUNCTION IF EXISTS events_desired_updated();
DROP FUNCTION IF EXISTS events_desired_created();
DROP FUNCTION IF EXISTS events_jobs_updated();
DROP FUNCTION IF EXISTS events_jobs_created();

-- The row triggers as migration 0024 left them.
CREATE FUNCTION events_job() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ws text := events_workspace(NEW.resource_id);
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO events_outbox (kind, workspace, object_id, at, data) VALUES ('job.created', ws, NEW.id, NEW.updated_at,
            jsonb_build_object('status', NEW.status, 'release_id', NEW.release_id, 'target_key', NEW.target_key));
        RETURN NULL;
    END IF;
    IF NEW.status IS NOT DISTINCT FROM OLD.status THEN
        RETURN NULL;
    END IF;
    INSERT INTO events_outbox (kind, workspace, object_id, at, data) VALUES ('job.status', ws, NEW.id, NEW.updated_at,
        jsonb_build_object('status', NEW.status, 'previous', OLD.status, 'release_id', NEW.release_id, 'target_key', NEW.target_key));
    IF NEW.status = 'successful' THEN
        INSERT INTO events_outbox (kind, workspace, object_id, at, data) VALUES ('target.current', ws, NEW.target_key, NEW.updated_at,
            jsonb_build_object('release_id', NEW.release_id, 'job_id', NEW.id));
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER release_jobs_changes AFTER INSERT OR UPDATE ON release_jobs
    FOR EACH ROW EXECUTE FUNCTION events_job();

CREATE FUNCTION events_desired() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.release_id = '' OR (TG_OP = 'UPDATE' AND NEW.release_id IS NOT DISTINCT FROM OLD.release_id) THEN
        RETURN NULL;
    END IF;
    INSERT INTO events_outbox (kind, workspace, object_id, at, data) VALUES ('target.desired',
        events_workspace(split_part(NEW.target_key, ':', 3)),
        NEW.target_key, NEW.updated_at, jsonb_build_object('release_id', NEW.release_id));
    RETURN NULL;
END $$;
CREATE TRIGGER release_desired_changes AFTER INSERT OR UPDATE ON release_desired
    FOR EACH ROW EXECUTE FUNCTION events_desired();
